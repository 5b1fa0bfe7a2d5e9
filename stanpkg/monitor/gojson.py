"""What the reference's monitoring output looks like byte for byte: Go's
``json.MarshalIndent(v, "", "  ")``, ``time.Time`` JSON, its uptime string, and how it
reads integers from query strings (monitoring.md §1, §2)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

__all__ = ["go_atoi", "go_json", "go_json_pieces", "go_time", "go_uptime"]

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_DECIMAL = re.compile(r"[+-]?[0-9]+")

# After json.dumps: an escape pair (kept whole, so "\\b" is never read as "\b") or a
# character Go escapes and Python does not.
_GO_DIFFERENCES = re.compile("\\\\.|[<>&\u2028\u2029]")
_GO_SPELLING = {
    "\\b": "\\u0008",  # go1.19 writes \b and \f as \u escapes
    "\\f": "\\u000c",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _go_spelling(match: re.Match[str]) -> str:
    text = match.group()
    return _GO_SPELLING.get(text, text)


_ENCODER = json.JSONEncoder(indent=2, ensure_ascii=False)
_JOIN_EVERY = 4096
# Cheap plain scans that tell whether the regex pass is needed at all.
_SUSPECTS = ("\\b", "\\f", "<", ">", "&", "\u2028", "\u2029")


def go_json(value: Any) -> str:
    """``json.MarshalIndent(value, "", "  ")``: dict keys in insertion order (Go struct
    order; callers sort map keys), non-ASCII text as UTF-8, no trailing newline.

    Runs in a worker thread for big documents: the text is joined in bounded pieces and
    the regex pass skipped when nothing needs it, so no single C call holds the GIL
    (and the event loop) for long.
    """
    return "".join(go_json_pieces(value))


def go_json_pieces(value: Any) -> list[str]:
    """:func:`go_json` in pieces of a few thousand tokens each."""
    pieces: list[str] = []
    batch: list[str] = []
    for chunk in _ENCODER.iterencode(value):
        batch.append(chunk)
        if len(batch) >= _JOIN_EVERY:
            pieces.append(_go_spelled("".join(batch)))
            batch.clear()
    pieces.append(_go_spelled("".join(batch)))
    return pieces


def _go_spelled(text: str) -> str:
    if not any(suspect in text for suspect in _SUSPECTS):
        return text
    return _GO_DIFFERENCES.sub(_go_spelling, text)


def go_time(unix_ns: int) -> str:
    """Go's ``time.Time`` JSON in the local zone: RFC 3339 with the nanoseconds'
    trailing zeros removed, ``Z`` for a zero offset."""
    seconds, nanos = divmod(unix_ns, 1_000_000_000)
    local = time.localtime(seconds)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", local)
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    offset = local.tm_gmtoff or 0
    if offset == 0:
        return text + "Z"
    sign = "+" if offset > 0 else "-"
    minutes = abs(offset) // 60
    return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def go_uptime(seconds: float) -> str:
    """The reference's uptime: ``1y2d3h4m5s``, leading zero units left out."""
    secs = int(seconds)
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    years = days // 365
    if years:
        return f"{years}y{days % 365}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if days:
        return f"{days}d{hours % 24}h{mins % 60}m{secs % 60}s"
    if hours:
        return f"{hours}h{mins % 60}m{secs % 60}s"
    if mins:
        return f"{mins}m{secs % 60}s"
    return f"{secs}s"


def go_atoi(text: str) -> int:
    """``n, _ := strconv.Atoi(text)``: 0 for anything but an optionally signed decimal,
    clamped to int64 when out of range (Atoi's value on a range error)."""
    if not _DECIMAL.fullmatch(text):
        return 0
    if len(text.lstrip("+-").lstrip("0")) > 19:  # also keeps int() off huge inputs
        return _INT64_MIN if text.startswith("-") else _INT64_MAX
    return max(_INT64_MIN, min(_INT64_MAX, int(text)))
