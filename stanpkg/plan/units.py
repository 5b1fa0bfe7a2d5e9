"""How limit values are written in the store-limits printout (defaults.md §8.4)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Literal

from stanpkg.plan.gotime import format_duration

LimitKind = Literal["count", "bytes", "duration"]

UNLIMITED = "unlimited"

_PREFIXES = ("K", "M", "G", "T", "P", "E")
_LOG_1024 = math.log(1024.0)


def _go_float_v(x: float) -> str:
    """Go's ``%v`` of an integral float64: shortest digits, exponent form from 1e+06."""
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    digits, exponent = Decimal(repr(abs(x))).normalize().as_tuple()[1:]
    text = "".join(map(str, digits))
    assert isinstance(exponent, int)  # finite input
    point = len(text) + exponent  # position of the decimal point in ``text``
    if point - 1 >= 6:  # Go's shortest %g switches to %e at exponent 6
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{sign}{mantissa}e+{point - 1:02d}"
    return sign + text + "0" * (point - len(text))


def friendly_bytes(n: int) -> str:
    """The reference's ``util.FriendlyBytes``: ``512 B``, ``1.50 KB``, ``976.56 MB``.

    The arithmetic is float64 on purpose: it reproduces the reference's artefacts, e.g.
    ``1048575`` prints ``1024.00 KB`` (log says KB, the quotient rounds up to 1024.00).
    """
    if n < 1024:
        return f"{_go_float_v(float(n))} B"
    if n >= 1 << 63:
        # Beyond int64 the reference can't go; stay readable (and float-free) in EB.
        hundredths = (n * 100 + 1024**6 // 2) // 1024**6
        return f"{hundredths // 100}.{hundredths % 100:02d} EB"
    fbytes = float(n)
    exp = min(int(math.log(fbytes) / _LOG_1024), len(_PREFIXES))
    return f"{fbytes / math.pow(1024.0, exp):.2f} {_PREFIXES[exp - 1]}B"


def size_as_written(n: int) -> str:
    """``n`` bytes as the configuration language writes it, exactly: ``1MB`` for 1048576,
    ``5M`` for 5000000 (its ``KB``, ``MB``... are powers of 1024, ``K``, ``M``... of 1000);
    the number itself when no suffix fits."""
    for power in range(len(_PREFIXES), 0, -1):
        letter = _PREFIXES[power - 1]
        if n and n % 1024**power == 0:
            return f"{n // 1024**power}{letter}B"
        if n and n % 1000**power == 0:
            return f"{n // 1000**power}{letter}"
    return str(n)


def render_limit_value(value: int, kind: LimitKind) -> str:
    """One limit as printed: 0 is ``unlimited``, otherwise by kind."""
    if value == 0:
        return UNLIMITED
    if kind == "bytes":
        return friendly_bytes(value)
    if kind == "duration":
        return format_duration(value)
    return str(value)
