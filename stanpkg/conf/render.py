"""Render a tree as canonical configuration text: ``parse(render(t)) == t``.

Canonical form: ``key: value`` one per line, maps as ``key {`` ... ``}`` indented by two
spaces, arrays of scalars inline (``[1, 2]``) and other arrays one element per line,
strings always double-quoted with escapes, integers in decimal, floats without exponent,
booleans ``true``/``false``, datetimes ``YYYY-MM-DDTHH:MM:SSZ``.

A MAP node renders as a document (its entries, no braces); any other node renders as a
single value (what :func:`parse_value` reads back).

Not every tree has a text: keys cannot contain a newline or both kinds of quote (keys
have no escapes, as in Go), floats must be finite, datetimes whole seconds in UTC. Such
trees raise ``ValueError``; trees produced by the parser always render.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from stanpkg.conf.errors import Position
from stanpkg.conf.nodes import Kind, MapEntry, Node
from stanpkg.conf.scalars import ESCAPES

_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ESCAPED = {v: "\\" + k for k, v in ESCAPES.items()}
_NEEDS_ESCAPE = re.compile('[\\\\"\x00-\x1f\x7f-\x9f]')
_BAD_KEY_CHAR = re.compile("[\r\n\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_INDENT = "  "


def render(node: Node) -> str:
    if node.kind is Kind.MAP:
        return render_with_positions(node)[0]
    if node.kind is Kind.ARRAY:
        out = _Lines()
        _array(node.items, 0, out, "", node.pos)
        return "\n".join(out.lines)
    return _scalar(node)


def render_with_positions(node: Node) -> tuple[str, tuple[Position, ...]]:
    """A MAP node rendered as :func:`render` does, with the source position behind each
    output line (an entry's key, an array element), so that an error another program
    reports in the rendered text can be shown where the user wrote it."""
    out = _Lines()
    _entries(node.entries, 0, out)
    return "".join(line + "\n" for line in out.lines), tuple(out.marks)


class _Lines:
    __slots__ = ("lines", "marks")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.marks: list[Position] = []

    def add(self, line: str, pos: Position) -> None:
        self.lines.append(line)
        self.marks.append(pos)


def _entries(entries: tuple[MapEntry, ...], depth: int, out: _Lines) -> None:
    pad = _INDENT * depth
    for entry in entries:
        key = _key(entry.key)
        node = entry.node
        at = entry.key_pos
        if node.kind is Kind.MAP:
            if not node.entries:
                out.add(f"{pad}{key} {{}}", at)
                continue
            out.add(f"{pad}{key} {{", at)
            _entries(node.entries, depth + 1, out)
            out.add(f"{pad}}}", at)
        elif node.kind is Kind.ARRAY:
            _array(node.items, depth, out, f"{key}: ", at)
        else:
            out.add(f"{pad}{key}: {_scalar(node)}", at)


def _array(items: tuple[Node, ...], depth: int, out: _Lines, prefix: str, at: Position) -> None:
    pad = _INDENT * depth
    if all(n.kind not in (Kind.MAP, Kind.ARRAY) for n in items):
        out.add(f"{pad}{prefix}[{', '.join(_scalar(n) for n in items)}]", at)
        return
    out.add(f"{pad}{prefix}[", at)
    inner = _INDENT * (depth + 1)
    for n in items:
        if n.kind is Kind.MAP:
            out.add(f"{inner}{{", n.pos)
            _entries(n.entries, depth + 2, out)
            out.add(f"{inner}}}", n.pos)
        elif n.kind is Kind.ARRAY:
            _array(n.items, depth + 1, out, "", n.pos)
        else:
            out.add(f"{inner}{_scalar(n)}", n.pos)
    out.add(f"{pad}]", at)


def _key(key: str) -> str:
    # "include" followed by white space would be the include keyword: quote it.
    if _BARE_KEY.fullmatch(key) and key.lower() != "include":
        return key
    if _BAD_KEY_CHAR.search(key):
        raise ValueError(f"key {key!r} cannot be written: keys have no escapes")
    if '"' not in key:
        return f'"{key}"'
    if "'" not in key:
        return f"'{key}'"
    raise ValueError(f"key {key!r} cannot be written: it contains both kinds of quote")


def _scalar(node: Node) -> str:
    kind, value = node.kind, node.value
    if kind is Kind.STRING:
        assert isinstance(value, str)
        return quote(value)
    if kind is Kind.BOOL:
        return "true" if value else "false"
    if kind is Kind.INT:
        assert isinstance(value, int)
        return str(value)
    if kind is Kind.FLOAT:
        assert isinstance(value, float)
        if not math.isfinite(value):
            raise ValueError(f"{value} cannot be written in the config language")
        text = format(Decimal(repr(value)), "f")
        return text if "." in text else text + ".0"
    if kind is Kind.DATETIME:
        assert isinstance(value, datetime)
        if value.utcoffset() != timedelta(0) or value.microsecond:
            raise ValueError(f"datetime {value} must be whole seconds in UTC")
        v = value.astimezone(UTC)
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}Z"
    raise ValueError(f"a {kind.value} node is not a scalar")


def quote(text: str) -> str:
    """``text`` as a double-quoted string literal."""
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    short = _ESCAPED.get(c)
    if short is not None:
        return short
    # Other control characters: their UTF-8 bytes as \xXX (the parser decodes runs).
    return "".join(f"\\x{b:02x}" for b in c.encode("utf-8"))
