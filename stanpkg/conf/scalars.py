"""Unquoted scalars: numbers, sizes, datetimes, booleans, and string escapes.

The functions here see one token's text and raise :class:`ScalarError` with an offset
relative to that text; the lexer turns it into a positioned ConfError.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from stanpkg.conf.nodes import Kind

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}

# k, m, g, t, p, e are powers of 1000; with b, i or ib they are powers of 1024.
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}

_NUMBER = re.compile(r"(-?)([0-9]*)(.*)", re.DOTALL)
_FRACTION = re.compile(r"\.[0-9]+")
_IP_LIKE = re.compile(r"[0-9.:\-]*")
_SIZE = re.compile(r"([kmgtpe])(b|i|ib)?", re.IGNORECASE)
# What the Go lexer takes for a (broken) size: a suffix letter, any of b/i, then a digit
# or the end. It rejects or mangles these (``1m30s``, ``1e5``, ``1kbi``); we reject them.
_BAD_SIZE = re.compile(r"[kmgtpe][bi]*(?:[0-9]|$)", re.IGNORECASE)
_DATETIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")

ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}


class ScalarError(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(offset, message)
        self.offset = offset
        self.message = message


def number(tok: str) -> tuple[Kind, object]:
    """Classify an unquoted token that starts with a digit or '-'.

    Integers (with optional size suffix), floats, Zulu datetimes; IP-like values
    (``10.0.0.1``, ``127.0.0.1:4222``) and digit-led words (``45s``, ``1h30m``) are
    strings, as in the Go parser. Everything it would misread is an error here.
    """
    m = _NUMBER.match(tok)
    assert m is not None
    sign, digits, rest = m.groups()
    head = len(sign) + len(digits)
    if not digits:
        raise ScalarError(len(sign), f"expected a digit after '-' in '{tok}'")
    if not rest:
        return Kind.INT, _int64(tok, int(sign + digits))
    first = rest[0]
    if first == ".":
        frac = _FRACTION.match(rest)
        if frac is None:
            raise ScalarError(head + 1, f"a '.' in the number '{tok}' must be followed by a digit")
        after = rest[frac.end() :]
        end = head + frac.end()
        if not after:
            value = float(tok)
            if math.isinf(value):
                raise ScalarError(0, f"float '{tok}' is out of range")
            return Kind.FLOAT, value
        if after[0] == "." and not sign:
            ip = _IP_LIKE.match(after)
            assert ip is not None
            if ip.end() == len(after):
                return Kind.STRING, tok
            end += ip.end()
        bad = tok[end]
        raise ScalarError(
            end,
            f"unexpected {bad!r} after the number '{tok[:end]}' "
            "(quote the value if it is meant as a string)",
        )
    if first == "-":
        if sign or len(digits) != 4:
            raise ScalarError(
                head, f"'{tok}' is not a number, and dates must be written YYYY-MM-DDTHH:MM:SSZ"
            )
        return Kind.DATETIME, _datetime(tok)
    size = _SIZE.fullmatch(rest)
    if size is not None:
        letter, binary = size.groups()
        base = 1024 if binary else 1000
        return Kind.INT, _int64(tok, int(sign + digits) * base ** _POWERS[letter.lower()])
    if _BAD_SIZE.match(rest) is not None:
        raise ScalarError(
            head,
            f"'{tok}' is neither a number nor a size (size suffixes: k, kb, ki, kib, m, mb, "
            "... e, eb, ei, eib); quote it if it is meant as a string",
        )
    if sign:
        raise ScalarError(head, f"unexpected {rest[0]!r} after the number '{tok[:head]}'")
    return Kind.STRING, tok


def _int64(tok: str, value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ScalarError(0, f"integer '{tok}' does not fit in a signed 64-bit integer")
    return value


def _datetime(tok: str) -> datetime:
    m = _DATETIME.fullmatch(tok)
    if m is None:
        raise ScalarError(0, f"invalid datetime '{tok}': expected the form YYYY-MM-DDTHH:MM:SSZ")
    y, mo, d, h, mi, s = (int(g) for g in m.groups())
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError as e:
        raise ScalarError(0, f"invalid datetime '{tok}': {e}") from None


def unescape(text: str) -> str:
    """Process ``\\t \\n \\r \\" \\\\ \\xXX`` escapes (consecutive \\x bytes are UTF-8)."""
    out: list[str] = []
    pending = bytearray()
    pending_at = 0
    last = 0
    for m in _ESCAPE.finditer(text):
        start = m.start()
        if start > last or m.group(1) != "x":
            _flush(out, pending, pending_at)
            out.append(text[last:start])
        c = m.group(1)
        if c == "x":
            hx = _HEX2.match(text, m.end())
            if hx is None:
                raise ScalarError(
                    start,
                    f"expected two hexadecimal digits after '\\x' in {text[start : start + 4]!r}",
                )
            if not pending:
                pending_at = start
            pending.append(int(hx.group(), 16))
            last = hx.end()
            continue
        if not c:
            raise ScalarError(start, "a '\\' must be followed by an escape character")
        if c not in ESCAPES:
            shown = c if c.isprintable() else f"U+{ord(c):04X}"
            raise ScalarError(
                start,
                f"invalid escape '\\{shown}' (allowed: \\t, \\n, \\r, \\\", \\\\, \\xXX)",
            )
        out.append(ESCAPES[c])
        last = m.end()
    _flush(out, pending, pending_at)
    out.append(text[last:])
    return "".join(out)


def _flush(out: list[str], pending: bytearray, at: int) -> None:
    if pending:
        try:
            out.append(pending.decode("utf-8"))
        except UnicodeDecodeError:
            raise ScalarError(at, "\\x escapes must form valid UTF-8") from None
        pending.clear()
