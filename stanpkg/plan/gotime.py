"""Go ``time.Duration`` text: ``time.ParseDuration`` and ``Duration.String()``.

The reference server reads every duration option with ``time.ParseDuration`` and prints
durations with ``Duration.String()``; both are reproduced exactly, error texts included,
because they appear verbatim in the limits printout and in the reference's messages.
Durations are plain ``int`` nanoseconds.
"""

from __future__ import annotations

NANOSECOND = 1
MICROSECOND = 1_000 * NANOSECOND
MILLISECOND = 1_000 * MICROSECOND
SECOND = 1_000 * MILLISECOND
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

# Go works on the UTF-8 bytes of the text, so the units are bytes too.
_UNITS: dict[bytes, int] = {
    b"ns": NANOSECOND,
    b"us": MICROSECOND,
    "\u00b5s".encode(): MICROSECOND,  # micro sign
    "\u03bcs".encode(): MICROSECOND,  # Greek small letter mu
    b"ms": MILLISECOND,
    b"s": SECOND,
    b"m": MINUTE,
    b"h": HOUR,
}

_MAX_UINT63 = 1 << 63  # Go accumulates in uint64 and allows up to 1<<63 (for the minimum)
_UINT64_MASK = (1 << 64) - 1
_DIGITS = b"0123456789"


class DurationError(ValueError):
    """A duration Go's ``time.ParseDuration`` rejects; ``str()`` is Go's message."""


def go_quote(raw: bytes) -> str:
    """Go's ``time.quote``: double quotes, ``\\xNN`` for control and non-ASCII bytes."""
    out = ['"']
    for b in raw:
        if b < 0x20 or b >= 0x80:
            out.append(f"\\x{b:02x}")
        elif b in b'"\\':
            out.append("\\" + chr(b))
        else:
            out.append(chr(b))
    out.append('"')
    return "".join(out)


def _leading_int(s: bytes, i: int) -> tuple[int, int] | None:
    """Digits from ``i``: (value, end), or None on uint64 overflow (like Go's leadingInt)."""
    x = 0
    n = len(s)
    while i < n and s[i] in _DIGITS:
        if x > _MAX_UINT63 // 10:
            return None
        x = x * 10 + s[i] - 0x30
        if x > _MAX_UINT63:
            return None
        i += 1
    return x, i


def _leading_fraction(s: bytes, i: int) -> tuple[int, float, int]:
    """Fraction digits from ``i``: (value, scale, end); excess digits only lose precision."""
    x = 0
    scale = 1.0
    overflow = False
    n = len(s)
    while i < n and s[i] in _DIGITS:
        if not overflow:
            if x > (_MAX_UINT63 - 1) // 10:
                overflow = True
            else:
                y = x * 10 + s[i] - 0x30
                if y > _MAX_UINT63:
                    overflow = True
                else:
                    x = y
                    scale *= 10
        i += 1
    return x, scale, i


def parse_duration(text: str) -> int:
    """Parse like Go's ``time.ParseDuration``; return nanoseconds.

    Raises :class:`DurationError` with Go's exact message.
    """
    raw = text.encode("utf-8", "surrogatepass")
    invalid = DurationError("time: invalid duration " + go_quote(raw))
    s = raw
    neg = False
    if s[:1] in (b"-", b"+"):
        neg = s[:1] == b"-"
        s = s[1:]
    if s == b"0":
        return 0
    if not s:
        raise invalid
    total = 0
    i, n = 0, len(s)
    while i < n:
        if not (s[i] == 0x2E or s[i] in _DIGITS):  # next must be [0-9.]
            raise invalid
        start = i
        parsed = _leading_int(s, i)
        if parsed is None:
            raise invalid
        value, i = parsed
        pre = i != start
        frac, scale, post = 0, 1.0, False
        if i < n and s[i] == 0x2E:
            i += 1
            frac_start = i
            frac, scale, i = _leading_fraction(s, i)
            post = i != frac_start
        if not pre and not post:  # e.g. ".s"
            raise invalid
        unit_start = i
        while i < n and not (s[i] == 0x2E or s[i] in _DIGITS):
            i += 1
        if i == unit_start:
            raise DurationError("time: missing unit in duration " + go_quote(raw))
        unit_text = s[unit_start:i]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(
                f"time: unknown unit {go_quote(unit_text)} in duration {go_quote(raw)}"
            )
        if value > _MAX_UINT63 // unit:
            raise invalid
        value *= unit
        if frac > 0:
            # Go computes the fraction in float64 and truncates, not rounds.
            value += int(float(frac) * (float(unit) / scale))
            if value > _MAX_UINT63:
                raise invalid
        # Go's uint64 sum wraps at 2**64 before its overflow check; keep that quirk.
        total = (total + value) & _UINT64_MASK
        if total > _MAX_UINT63:
            raise invalid
    if neg:
        return -total
    if total > _MAX_UINT63 - 1:
        raise invalid
    return total


def _frac_digits(v: int, prec: int) -> tuple[str, int]:
    """Go's fmtFrac: ('.ddd' without trailing zeros, or ''), and v // 10**prec."""
    v, frac = divmod(v, 10**prec)
    digits = f"{frac:0{prec}d}".rstrip("0")
    return ("." + digits if digits else ""), v


def format_duration(ns: int) -> str:
    """Go's ``Duration.String()``: ``0s``, ``1.5µs``, ``100ms``, ``1h30m0s``, ``-1s``.

    Any ``int`` is accepted; beyond the int64 range hours simply keep growing.
    """
    u = -ns if ns < 0 else ns
    sign = "-" if ns < 0 else ""
    if u == 0:
        return "0s"
    if u < SECOND:
        if u < MICROSECOND:
            return f"{sign}{u}ns"
        if u < MILLISECOND:
            frac, whole = _frac_digits(u, 3)
            return f"{sign}{whole}{frac}\u00b5s"
        frac, whole = _frac_digits(u, 6)
        return f"{sign}{whole}{frac}ms"
    frac, secs = _frac_digits(u, 9)
    mins, secs = divmod(secs, 60)
    if mins == 0:
        return f"{sign}{secs}{frac}s"
    hours, mins = divmod(mins, 60)
    if hours == 0:
        return f"{sign}{mins}m{secs}{frac}s"
    return f"{sign}{hours}h{mins}m{secs}{frac}s"
