"""The parsed tree: immutable nodes that remember where they were written.

Equality and hashing are structural: two nodes are equal when their kinds and values are
(for maps: the same keys, in the same order, with equal nodes). Positions, the source
text (``raw``), the ``quoted`` flag and the bookkeeping (``used_as_variable``, shadowed
duplicates) do not take part, so ``parse(render(t)) == t``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import cast

from stanpkg.conf.errors import Position


class Kind(enum.Enum):
    STRING = "string"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    DATETIME = "datetime"
    ARRAY = "array"
    MAP = "map"


@dataclass(frozen=True, slots=True)
class MapEntry:
    key: str
    key_pos: Position = field(compare=False)
    node: Node
    # True when a ``$KEY`` reference read this entry (so it need not be an option).
    used_as_variable: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class Node:
    """One value.

    ``value`` is, by kind: STRING ``str``, INT ``int``, FLOAT ``float``, BOOL ``bool``,
    DATETIME ``datetime`` (UTC), ARRAY ``tuple[Node, ...]``, MAP ``tuple[MapEntry, ...]``
    (one entry per key after last-wins de-duplication, in order of final definition).
    """

    kind: Kind
    value: object
    pos: Position = field(compare=False)
    quoted: bool = field(default=False, compare=False)  # "..." / '...' / ( ) strings
    raw: str = field(default="", compare=False)  # source text of a scalar, e.g. "10KB"
    # MAP only: entries that a later definition of the same key replaced.
    shadowed: tuple[MapEntry, ...] = field(default=(), compare=False, repr=False)
    # MAP only: lookup tables for get() (exact, casefolded), built on first use.
    _lookup: tuple[dict[str, MapEntry], dict[str, MapEntry]] | None = field(
        default=None, init=False, compare=False, repr=False
    )

    @property
    def entries(self) -> tuple[MapEntry, ...]:
        """The entries of a MAP node."""
        if self.kind is not Kind.MAP:
            raise TypeError(f"entries of a {self.kind.value} node")
        return cast("tuple[MapEntry, ...]", self.value)

    @property
    def items(self) -> tuple[Node, ...]:
        """The elements of an ARRAY node."""
        if self.kind is not Kind.ARRAY:
            raise TypeError(f"items of a {self.kind.value} node")
        return cast("tuple[Node, ...]", self.value)

    @property
    def duplicates(self) -> tuple[MapEntry, ...]:
        """MAP only: the earlier definitions of keys that were defined again (also those
        inside included files), so that a later layer can warn about them."""
        return self.shadowed

    def get(self, key: str, *, casefold: bool = False) -> MapEntry | None:
        """The entry for ``key`` in a MAP node, or None.

        With ``casefold=True`` keys are compared case-insensitively (``str.casefold``);
        if several keys differ only in case, the one defined last wins.
        """
        lookup = self._lookup
        if lookup is None:
            entries = self.entries
            lookup = ({e.key: e for e in entries}, {e.key.casefold(): e for e in entries})
            object.__setattr__(self, "_lookup", lookup)
        if casefold:
            return lookup[1].get(key.casefold())
        return lookup[0].get(key)
