"""Option values of a plan, read by the options table's paths, and shown safely.

Secrets are compared by value but never shown; URLs lose their passwords; sizes and
durations are shown as the configuration language writes them (``10MB``, ``1h30m0s``),
limits of 0 as ``unlimited``.
"""

from __future__ import annotations

from typing import Any

from stanpkg.plan.gotime import format_duration
from stanpkg.plan.limits import Limits
from stanpkg.plan.model import Plan, Secret
from stanpkg.plan.options import BY_PATH, Kind, Option
from stanpkg.plan.redact import REDACTED, redact_urls
from stanpkg.plan.units import UNLIMITED, size_as_written


def raw_value(plan: Plan, opt: Option) -> object:
    """The plan's value of ``opt`` (the model has one field per option, same names)."""
    if opt.section == "store_limits":
        if opt.name == "max_channels":
            return plan.store_limits.max_channels
        return getattr(plan.store_limits.defaults, opt.name)
    holder = getattr(plan, opt.section) if opt.section else plan
    return getattr(holder, opt.name)


def comparable(value: object) -> object:
    return value.reveal() if isinstance(value, Secret) else value


def json_value(opt: Option, value: object) -> Any:
    """As ``stanpkg plan`` would show it: secrets redacted, URLs without passwords."""
    if isinstance(value, Secret) or opt.secret:
        return REDACTED if comparable(value) else ""
    if isinstance(value, tuple):
        value = list(value)
    if opt.url_credentials:
        if isinstance(value, str):
            return redact_urls(value)
        if isinstance(value, list):
            return [redact_urls(str(v)) for v in value]
    return value


def text_value(opt: Option, value: object) -> str:
    shown = json_value(opt, value)
    if opt.secret:
        return "<redacted>" if shown else "(none)"
    if isinstance(shown, bool):
        return "true" if shown else "false"
    if isinstance(shown, int):
        if shown == 0 and opt.section == "store_limits":
            return UNLIMITED
        if opt.kind is Kind.SIZE and shown > 0:
            return size_as_written(shown)
        if opt.kind is Kind.DURATION:
            return format_duration(shown)
        return str(shown)
    if isinstance(shown, list):
        return "[" + ", ".join(f'"{v}"' for v in shown) + "]"
    return f'"{shown}"'


def limit_text(limit: str, value: int) -> str:
    """One per-channel limit's value, shown as the global option of that name."""
    return text_value(BY_PATH[f"store_limits.{limit}"], value)


def limit_value(limits: Limits, limit: str) -> int:
    value = getattr(limits, limit)
    assert isinstance(value, int)
    return value
