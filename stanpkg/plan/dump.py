"""The plan as JSON-ready data (``stanpkg plan``), secrets redacted.

What is hidden is said by the options table: a secret option's value entirely, the
password (or token) of the URLs in an option marked ``url_credentials``.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from stanpkg.plan.gotime import format_duration
from stanpkg.plan.limits import StoreLimits
from stanpkg.plan.model import Plan, Secret
from stanpkg.plan.options import BY_PATH, OPTIONS, Kind
from stanpkg.plan.redact import REDACTED, redact_urls
from stanpkg.plan.units import size_as_written

# Fields of the plan holding an options-table section, by field name.
_SECTIONS = frozenset({"file_options", "sql_options", "cluster", "tls", "nats_server"})


def _value(value: object, section: str = "") -> Any:
    if isinstance(value, Secret):
        return REDACTED if value else ""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, StoreLimits):
        return {
            "max_channels": value.max_channels,
            **dataclasses.asdict(value.defaults),
            "channels": {c.name: dataclasses.asdict(c.limits) for c in value.channels},
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _field(section, f.name, getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name not in _NOT_DUMPED
        }
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    return value


_NOT_DUMPED = frozenset({"passthrough_positions"})  # bookkeeping for error messages


def _field(section: str, name: str, value: object) -> Any:
    # NATS passthrough text may hold account passwords: show only its size.
    if name == "passthrough" and value:
        return f"{REDACTED} ({len(str(value))} bytes of NATS configuration)"
    opt = BY_PATH.get(f"{section}.{name}" if section else name)
    if opt is not None and opt.secret:
        return REDACTED if value else ""
    if opt is not None and opt.url_credentials:
        if isinstance(value, str):
            return redact_urls(value)
        if isinstance(value, tuple):
            return [redact_urls(str(v)) for v in value]
    return _value(value, name if not section and name in _SECTIONS else "")


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(plan):
        if f.name == "provenance":
            continue
        out[f.name] = _field("", f.name, getattr(plan, f.name))
    out["mode"] = plan.mode.value
    out["readable"] = readable_values(out, plan)
    out["provenance"] = {path: str(src) for path, src in sorted(plan.provenance.items())}
    return out


def readable_values(dumped: dict[str, Any], plan: Plan) -> dict[str, str]:
    """Sizes and durations as the configuration language writes them (``1MB``, ``1h30m``),
    by option path: the plan keeps the raw numbers (bytes, nanoseconds) for programs."""
    readable: dict[str, str] = {}

    def add(path: str, kind: Kind, value: object) -> None:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            text = size_as_written(value) if kind is Kind.SIZE else format_duration(value)
            readable[path] = text

    for opt in OPTIONS:
        if opt.kind not in (Kind.SIZE, Kind.DURATION):
            continue
        node: Any = dumped
        for part in opt.path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        add(opt.path, opt.kind, node)
        if opt.per_channel:
            name = opt.path.rpartition(".")[2]
            for channel in plan.store_limits.channels:
                path = f'store_limits.channels["{channel.name}"].{name}'
                add(path, opt.kind, getattr(channel.limits, name))
    return readable
