"""The compiler's working state: the normalised configuration and where each value came from.

One :class:`Context` goes through the whole compilation: the readers of the configuration
files (plan/collect.py) fill it, then the environment, the flags, the conversions and the
rules (plan/compile.py, plan/rules.py) work on it, and the plan is built from it."""

from __future__ import annotations

from dataclasses import dataclass, field

from stanpkg.conf import MapEntry, Position
from stanpkg.plan.diagnostics import Diagnostic, error, warning
from stanpkg.plan.model import Source
from stanpkg.plan.options import BY_PATH, Option

Path = tuple[str, ...]


def dotted(path: Path) -> str:
    """A path as text; channel names (which contain dots) are quoted."""
    if len(path) >= 3 and path[:2] == ("store_limits", "channels"):
        rest = "".join(f".{p}" for p in path[3:])
        return f'store_limits.channels["{path[2]}"]{rest}'
    return ".".join(path)


def option_for(path: Path) -> Option | None:
    """The table entry behind a normalised path (per-channel limits map to store_limits)."""
    if len(path) == 4 and path[:2] == ("store_limits", "channels"):
        return BY_PATH.get(f"store_limits.{path[3]}")
    return BY_PATH.get(".".join(path))


@dataclass
class Context:
    config: dict[str, object] = field(default_factory=dict)
    positions: dict[Path, Position] = field(default_factory=dict)
    sources: dict[Path, Source] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Entries of the NATS configuration passed through to nats-server as they are.
    passthrough: list[MapEntry] = field(default_factory=list)
    # Paths whose value was rejected (bad type, range, duration): the rules still run on
    # the rest of the configuration, and must read these as unknown, not as the default.
    invalid: set[Path] = field(default_factory=set)
    # Repeated entries already reported: a file read both for streaming and NATS options
    # is walked twice.
    reported_repeats: set[Position] = field(default_factory=set)

    @property
    def nats_passthrough_keys(self) -> frozenset[str]:
        """Top-level keys of the NATS configuration passed through to nats-server (rules
        that depend on, e.g., a NATS cluster block look here: they are not options of ours)."""
        return frozenset(entry.key.lower() for entry in self.passthrough)

    def get(self, path: Path, default: object = None) -> object:
        node: object = self.config
        for part in path:
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def is_set(self, path: Path) -> bool:
        return self.get(path, _MISSING) is not _MISSING

    def set(self, path: Path, value: object, source: Source) -> None:
        self._store(path, value)
        self.sources[path] = source
        if source.kind != "file":
            self.positions.pop(path, None)

    def set_at(self, path: Path, value: object, pos: Position | None) -> None:
        """A value read from a configuration file at ``pos``."""
        self._store(path, value)
        if pos is not None:
            self.place(path, pos)

    def place(self, path: Path, pos: Position) -> None:
        """``path`` (a value or a section map) is written in a file at ``pos``."""
        self.positions[path] = pos
        self.sources[path] = Source("file", str(pos))

    def _store(self, path: Path, value: object) -> None:
        target = self.config
        for part in path[:-1]:
            child = target.setdefault(part, {})
            assert isinstance(child, dict)
            target = child
        target[path[-1]] = value

    def delete(self, path: Path) -> None:
        parent = self.get(path[:-1])
        if isinstance(parent, dict):
            parent.pop(path[-1], None)

    def reject(self, path: Path) -> None:
        """Drop a value that was reported as wrong; it reads as unknown from now on."""
        self.delete(path)
        self.invalid.add(path)

    def is_valid(self, *paths: Path) -> bool:
        """False when a value at (or above) one of ``paths`` was rejected."""
        return not any(path[:n] in self.invalid for path in paths for n in range(1, len(path) + 1))

    def value(self, path: Path) -> object:
        """The configured value, or the table's default; None for a rejected value."""
        if self.invalid and not self.is_valid(path):
            return None
        got = self.get(path, _MISSING)
        if got is not _MISSING:
            return got
        opt = option_for(path)
        return None if opt is None else opt.default

    def _where(self, path: Path) -> tuple[Position | None, str]:
        for probe in (path, path[:-1], path[:1]):
            if probe in self.positions:
                return self.positions[probe], ""
            if probe in self.sources:
                return None, self.sources[probe].where
        return None, ""

    def error(self, path: Path, message: str, code: str = "") -> None:
        pos, where = self._where(path)
        self.diagnostics.append(error(message, pos, where=where, code=code))

    def warning(self, path: Path, message: str, code: str = "") -> None:
        pos, where = self._where(path)
        self.diagnostics.append(warning(message, pos, where=where, code=code))


_MISSING = object()
