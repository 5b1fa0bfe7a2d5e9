"""Test helpers: a compact, readable text form of parsed trees."""

from __future__ import annotations

from datetime import datetime

from stanpkg.conf import Kind, Node


def dump(node: Node) -> str:
    """One line per entry/element: ``key @line:col = KIND value @line:col``.

    Quoted strings are marked ``q``, entries read through ``$KEY`` ``[var]``; maps and
    arrays list their children indented below them.
    """
    lines: list[str] = []
    if node.kind is Kind.MAP:
        _entries(node, 0, lines)
    else:
        _value(node, 0, "", lines)
    return "\n".join(lines)


def _entries(node: Node, depth: int, out: list[str]) -> None:
    for e in node.entries:
        flag = " [var]" if e.used_as_variable else ""
        key = e.key if e.key and e.key.strip() == e.key else repr(e.key)
        _value(e.node, depth, f"{key} @{e.key_pos.line}:{e.key_pos.col}{flag} = ", out)


def _value(node: Node, depth: int, prefix: str, out: list[str]) -> None:
    pad = "  " * depth
    at = f"@{node.pos.line}:{node.pos.col}"
    if node.kind is Kind.MAP:
        out.append(f"{pad}{prefix}MAP {at}")
        _entries(node, depth + 1, out)
    elif node.kind is Kind.ARRAY:
        out.append(f"{pad}{prefix}ARRAY {at}")
        for item in node.items:
            _value(item, depth + 1, "- ", out)
    else:
        value = node.value
        shown = value.isoformat() if isinstance(value, datetime) else repr(value)
        q = " q" if node.quoted else ""
        out.append(f"{pad}{prefix}{node.kind.name} {shown}{q} {at}")


def strip(text: str) -> str:
    """Dedented expectation text without blank lines."""
    import textwrap

    return "\n".join(line for line in textwrap.dedent(text).splitlines() if line.strip())
