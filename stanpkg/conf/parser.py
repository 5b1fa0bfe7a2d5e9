"""Parser: tokens -> tree, with variables, environment lookup and includes.

The parser is iterative (an explicit stack of open maps and arrays), so nesting depth
costs no Python recursion; it is still capped at ``MAX_DEPTH`` because every consumer of
the tree recurses.

Variables follow the Go parser: every key defined so far in an enclosing, still open map
is a variable (``$KEY``), innermost first, then the environment, whose value is parsed as
a config value. An included file is parsed on its own (it sees the environment, not the
including file's keys); its entries then join the map where ``include`` stands, where
later references can use them.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from stanpkg.conf.errors import ConfError, Position
from stanpkg.conf.lexer import (
    ARRAY_END,
    ARRAY_START,
    DOCUMENT_START,
    EOF,
    INCLUDE,
    KEY,
    MAP_END,
    MAP_START,
    SCALAR,
    VARIABLE,
    Lexer,
)
from stanpkg.conf.nodes import Kind, MapEntry, Node
from stanpkg.conf.source_text import SourceText, read_text

MAX_DEPTH = 100  # nested maps/arrays, across includes
MAX_INCLUDE_DEPTH = 32
_MAP, _ARRAY = Kind.MAP, Kind.ARRAY


class _MapFrame:
    __slots__ = ("dups", "entries", "key", "key_offset", "offset", "used")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.entries: dict[str, MapEntry] = {}
        self.dups: list[MapEntry] = []
        self.used: set[str] | None = None  # keys read through $KEY
        self.key = ""  # the key waiting for its value
        self.key_offset = 0

    def define(self, entry: MapEntry) -> None:
        key = entry.key
        old = self.entries.pop(key, None)
        if old is not None:
            if self.used is not None and key in self.used:
                self.used.discard(key)
                old = replace(old, used_as_variable=True)
            self.dups.append(old)
        self.entries[key] = entry

    def freeze(self, pos: Position) -> Node:
        entries = self.entries
        if self.used:
            for key in self.used:
                entries[key] = replace(entries[key], used_as_variable=True)
        return Node(_MAP, tuple(entries.values()), pos, shadowed=tuple(self.dups))


class _ArrayFrame:
    __slots__ = ("items", "offset")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.items: list[Node] = []


_Frame = _MapFrame | _ArrayFrame


class Parser:
    def __init__(
        self,
        src: SourceText,
        env: Mapping[str, str],
        base_dir: str,
        includes: tuple[tuple[str, str], ...] = (),
        depth: int = 0,
        resolving: frozenset[str] = frozenset(),
    ) -> None:
        self.src = src
        self.env = env
        self.base_dir = base_dir  # "" = the current directory
        self.includes = includes  # (real path, shown path) of the files being parsed
        self.depth = depth  # nesting depth of the include point in the including file
        self.resolving = resolving  # environment variables being expanded

    def parse_document(self) -> Node:
        self.src.check_characters()
        root = _MapFrame(0)
        self._run(Lexer(self.src), [root])
        return root.freeze(self.src.pos(root.offset))

    def parse_value(self) -> Node:
        self.src.check_characters()
        holder = _ArrayFrame(0)
        self._run(Lexer(self.src, value_only=True), [holder])
        return holder.items[0]

    def _run(self, lx: Lexer, stack: list[_Frame]) -> None:
        pos = self.src.pos
        next_token = lx.next
        max_len = MAX_DEPTH - self.depth + 1
        while True:
            t, value, offset, kind, raw, quoted = next_token()
            if t is KEY:
                frame = stack[-1]
                assert type(frame) is _MapFrame
                frame.key = value
                frame.key_offset = offset
                continue
            if t is SCALAR:
                assert kind is not None
                node = Node(kind, value, pos(offset), quoted, raw)
            elif t is MAP_START or t is ARRAY_START:
                if len(stack) >= max_len:
                    raise ConfError(
                        pos(offset), f"maps and arrays nested deeper than {MAX_DEPTH} levels"
                    )
                stack.append(_MapFrame(offset) if t is MAP_START else _ArrayFrame(offset))
                continue
            elif t is MAP_END:
                if len(stack) == 1:  # the '}' of a document wrapped in braces
                    continue
                done = stack.pop()
                assert type(done) is _MapFrame
                node = done.freeze(pos(done.offset))
            elif t is ARRAY_END:
                done = stack.pop()
                assert type(done) is _ArrayFrame
                node = Node(_ARRAY, tuple(done.items), pos(done.offset))
            elif t is VARIABLE:
                node = self._variable(stack, value, pos(offset))
            elif t is INCLUDE:
                self._include(stack, value, pos(offset))
                continue
            elif t is DOCUMENT_START:
                stack[0].offset = offset
                continue
            else:
                assert t is EOF
                return
            parent = stack[-1]
            if type(parent) is _MapFrame:
                parent.define(MapEntry(parent.key, pos(parent.key_offset), node))
            else:
                assert type(parent) is _ArrayFrame
                parent.items.append(node)

    def _variable(self, stack: list[_Frame], name: str, at: Position) -> Node:
        for frame in reversed(stack):
            if type(frame) is _MapFrame:
                entry = frame.entries.get(name)
                if entry is not None:
                    if frame.used is None:
                        frame.used = set()
                    frame.used.add(name)
                    return replace(entry.node, pos=at)
        return self._from_env(name, at)

    def _from_env(self, name: str, at: Position) -> Node:
        if name in self.resolving:
            raise ConfError(
                at, f"environment variable '{name}' refers to itself (maybe through others)"
            )
        text = self.env.get(name)
        if text is None:
            raise ConfError(at, f"variable reference for '{name}' can not be found")
        if text == "":
            return Node(Kind.STRING, "", at)
        sub = Parser(
            SourceText(text, f"<env {name}>"),
            self.env,
            self.base_dir,
            self.includes,
            self.depth,
            self.resolving | {name},
        )
        try:
            node = sub.parse_value()
        except ConfError as e:
            raise ConfError(
                at, f"environment variable '{name}' does not hold a valid value: {e}"
            ) from None
        return replace(node, pos=at)

    def _include(self, stack: list[_Frame], path: str, at: Position) -> None:
        frame = stack[-1]
        assert type(frame) is _MapFrame
        shown = os.path.normpath(os.path.join(self.base_dir, path))
        real = os.path.realpath(shown)
        for seen_real, _ in self.includes:
            if seen_real == real:
                chain = " -> ".join([s for _, s in self.includes] + [shown])
                raise ConfError(at, f"include cycle: {chain}")
        if len(self.includes) >= MAX_INCLUDE_DEPTH:
            raise ConfError(at, f"includes nested deeper than {MAX_INCLUDE_DEPTH} levels")
        try:
            what = f"include file '{path}'" + (f" ({shown})" if shown != path else "")
            text = read_text(shown, at, what)
            sub = Parser(
                SourceText(text, shown),
                self.env,
                os.path.dirname(shown),
                (*self.includes, (real, shown)),
                self.depth + len(stack) - 1,
            )
            node = sub.parse_document()
        except ConfError as e:
            if e.pos is at:
                raise
            raise ConfError(e.pos, f"{e.message} (included from {at})") from None
        for entry in node.entries:
            frame.define(entry)
        frame.dups.extend(node.shadowed)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while parsing.

    A parse allocates hundreds of thousands of objects in acyclic trees: the collections
    those allocations trigger find nothing and cost about a quarter of the time of a
    large configuration (100k channels).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def parse_file(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Node:
    """Parse a configuration file into its top-level MAP node.

    Positions name the file as ``path`` was given; includes resolve relative to its
    directory. A file that cannot be read is reported at ``path:0:0`` (the file as a
    whole) as ``cannot read PATH: reason``.
    """
    name = os.fspath(path)
    text = read_text(name, None, f"configuration file '{name}'")
    includes = ((os.path.realpath(name), name),)
    parser = Parser(SourceText(text, name), _environ(env), os.path.dirname(name), includes)
    with gc_paused():
        return parser.parse_document()


def parse_string(
    text: str,
    filename: str = "<string>",
    env: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> Node:
    """Parse configuration text into its top-level MAP node.

    ``filename`` names positions; includes resolve relative to ``base_dir`` (default:
    the current directory). ``env`` defaults to ``os.environ``.
    """
    base = "" if base_dir is None else os.fspath(base_dir)
    parser = Parser(SourceText(text, filename), _environ(env), base)
    with gc_paused():
        return parser.parse_document()


def parse_value(
    text: str, filename: str = "<flag>", *, env: Mapping[str, str] | None = None
) -> Node:
    """Parse one value, as if written ``v = <text>`` (e.g. a command-line size)."""
    parser = Parser(SourceText(text, filename), _environ(env), "")
    with gc_paused():
        return parser.parse_value()
