"""stanpkg.conf: the NATS configuration language, with no streaming knowledge.

Text -> :class:`Node` trees whose every value and key carries its :class:`Position`;
every failure is a :class:`ConfError` with a position. See ``lexer.py`` for where the
language deliberately differs from the Go reference (it rejects mistakes the reference
silently accepts).
"""

from stanpkg.conf.errors import ConfError, Position
from stanpkg.conf.nodes import Kind, MapEntry, Node
from stanpkg.conf.parser import gc_paused, parse_file, parse_string, parse_value
from stanpkg.conf.render import render, render_with_positions

__all__ = [
    "ConfError",
    "Kind",
    "MapEntry",
    "Node",
    "Position",
    "gc_paused",
    "parse_file",
    "parse_string",
    "parse_value",
    "render",
    "render_with_positions",
]
