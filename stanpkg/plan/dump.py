"""The plan as JSON-ready data (``stanpkg plan``), secrets redacted."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from stanpkg.plan.limits import StoreLimits
from stanpkg.plan.model import Plan, Secret

REDACTED = "<redacted>"


def _value(value: object) -> Any:
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
            f.name: _field(f.name, getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name not in _NOT_DUMPED
        }
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    return value


_NOT_DUMPED = frozenset({"passthrough_positions"})  # bookkeeping for error messages


def _field(name: str, value: object) -> Any:
    # NATS passthrough text may hold account passwords: show only its size.
    if name == "passthrough" and value:
        return f"{REDACTED} ({len(str(value))} bytes of NATS configuration)"
    return _value(value)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(plan):
        if f.name == "provenance":
            continue
        out[f.name] = _value(getattr(plan, f.name))
    out["mode"] = plan.mode.value
    out["provenance"] = {path: str(src) for path, src in sorted(plan.provenance.items())}
    return out
