"""Channel names as NATS subjects: validity rules and the sublist tree of per-channel limits.

Two validity levels exist on purpose. :func:`is_valid_channel_name` is the reference
server's rule (``util.IsChannelNameValid``). :func:`channel_name_problem` adds stanpkg's
stricter rule on top: no whitespace or control characters, which the reference accepts in
a configuration file (see conformance case ``chan_space_in_name``) although no client can
ever publish to such a channel (the NATS protocol splits subjects on whitespace). Callers
use ``NameProblem.reference_accepts`` to say "valid for the reference, not for us".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

SEPARATOR = "."
STAR = "*"  # matches exactly one token
GT = ">"  # matches one or more trailing tokens


def is_valid_channel_name(name: str, allow_wildcards: bool) -> bool:
    """The reference's rule: non-empty ``.``-separated tokens, no ``/``; with wildcards,
    ``*`` only as a whole token and ``>`` only as the whole last token; without, neither.
    """
    return _reference_problem(name, allow_wildcards) is None


def _reference_problem(name: str, allow_wildcards: bool) -> str | None:
    if not name:
        return "the name is empty"
    if "/" in name:  # the reference's file store uses channel names as directory names
        return "'/' is not allowed"
    tokens = name.split(SEPARATOR)
    if "" in tokens:
        return "empty token (leading, trailing or doubled '.')"
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        if STAR not in token and GT not in token:
            continue
        if not allow_wildcards:
            return "wildcards ('*', '>') are not allowed here"
        if token not in (STAR, GT):
            return f"'*' and '>' must be whole tokens (got {token!r})"
        if token == GT and i != last:
            return "'>' must be the last token"
    return None


def _forbidden_character(name: str) -> str | None:
    if name.isprintable() and " " not in name:  # the common case, without a per-char scan
        return None
    for ch in name:
        category = unicodedata.category(ch)
        if ch.isspace() or category == "Cc":
            return f"contains whitespace or a control character (U+{ord(ch):04X})"
        if category == "Cs":
            return f"contains an unpaired surrogate (U+{ord(ch):04X})"
    return None


@dataclass(frozen=True, slots=True)
class NameProblem:
    """Why a channel name is rejected; ``reference_accepts`` if only stanpkg rejects it."""

    message: str
    reference_accepts: bool


def channel_name_problem(name: str, allow_wildcards: bool) -> NameProblem | None:
    """stanpkg's rule: the reference's, and no whitespace, control characters or surrogates."""
    reference = _reference_problem(name, allow_wildcards)
    if reference is not None:
        return NameProblem(reference, reference_accepts=False)
    strict = _forbidden_character(name)
    if strict is not None:
        return NameProblem(strict, reference_accepts=True)
    return None


def is_literal(name: str) -> bool:
    """True if the (valid) name has no wildcard token."""
    return STAR not in name and GT not in name


class _Node(Generic[T]):
    """A token position; holds a value if some inserted name ends here."""

    __slots__ = ("has_value", "name", "next", "value")

    def __init__(self) -> None:
        self.next: _Level[T] | None = None  # created on demand: most nodes are leaves
        self.has_value = False
        self.name = ""
        self.value: T


class _Level(Generic[T]):
    """The children of one token position: literal tokens, and the two wildcards."""

    __slots__ = ("gt", "literals", "star")

    def __init__(self) -> None:
        self.literals: dict[str, _Node[T]] = {}
        self.star: _Node[T] | None = None
        self.gt: _Node[T] | None = None

    def child(self, token: str) -> _Node[T]:
        if token == STAR:
            if self.star is None:
                self.star = _Node()
            return self.star
        if token == GT:
            if self.gt is None:
                self.gt = _Node()
            return self.gt
        node = self.literals.get(token)
        if node is None:
            node = self.literals[token] = _Node()
        return node


class SubjectTree(Generic[T]):
    """A NATS sublist keyed by channel names, one value per name.

    Order matters here: :meth:`match_list` returns matches in the order of the
    reference's sublist (widest first), which defines both inheritance and printout
    levels, and :meth:`walk` visits names in the printout order. Any string can be
    inserted (the tree does not validate); a ``>`` token followed by more tokens is kept
    but can never match anything.

    The reference's recursive match emits entries in lexicographic order of their tokens
    ranked ``>`` < ``*`` < literal (all matching literals being equal), so the searches
    below are depth-first, taking ``>``, then ``*``, then the literal at each position
    (or the reverse, narrowest first). Explicit stacks keep very deep names clear of
    Python's recursion limit.
    """

    __slots__ = ("_count", "_root")

    def __init__(self) -> None:
        self._root: _Level[T] = _Level()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def insert(self, name: str, value: T) -> None:
        """Add ``name`` with ``value``; inserting an existing name replaces its value."""
        level = self._root
        tokens = name.split(SEPARATOR)
        last = len(tokens) - 1
        for i, token in enumerate(tokens):
            node = level.child(token)
            if i == last:
                if not node.has_value:
                    self._count += 1
                node.has_value, node.name, node.value = True, name, value
                return
            if node.next is None:
                node.next = _Level()
            level = node.next

    def match_list(self, name: str) -> list[T]:
        """Values of every entry matching ``name``, in the reference's sublist order.

        ``*`` and ``>`` inside ``name`` are ordinary tokens here (an entry ``*`` matches
        them, a literal entry never does), which is how the reference matches an entry's
        own name to find its parent.
        """
        tokens = name.split(SEPARATOR)
        last = len(tokens) - 1
        out: list[T] = []
        stack = [(self._root, 0)]
        while stack:
            level, i = stack.pop()
            # Everything still on the stack comes after this subtree, whose own order
            # is: its '>' entry, the '*' subtree, the literal subtree.
            gt = level.gt
            if gt is not None and gt.has_value:
                out.append(gt.value)
            star = level.star
            literal = level.literals.get(tokens[i])
            if i == last:
                if star is not None and star.has_value:
                    out.append(star.value)
                if literal is not None and literal.has_value:
                    out.append(literal.value)
                continue
            if literal is not None and literal.next is not None:
                stack.append((literal.next, i + 1))
            if star is not None and star.next is not None:
                stack.append((star.next, i + 1))  # popped first
        return out

    def lookup_narrowest(self, channel: str) -> T | None:
        """The value of the last entry of ``match_list(channel)``, or None.

        This is the limit lookup for every channel created at run time, so it searches
        narrowest-first and stops at the first hit instead of building the whole list.
        """
        tokens = channel.split(SEPARATOR)
        last = len(tokens) - 1
        # (level, i) explores ``level`` at token i; (level, -1) stands for its '>' entry,
        # which comes after everything narrower below that level.
        stack = [(self._root, 0)]
        while stack:
            level, i = stack.pop()
            if i < 0:
                gt = level.gt
                assert gt is not None
                return gt.value
            gt = level.gt
            if gt is not None and gt.has_value:
                stack.append((level, -1))
            star = level.star
            literal = level.literals.get(tokens[i])
            if i == last:
                if literal is not None and literal.has_value:
                    return literal.value
                if star is not None and star.has_value:
                    return star.value
                continue
            if star is not None and star.next is not None:
                stack.append((star.next, i + 1))
            if literal is not None and literal.next is not None:
                stack.append((literal.next, i + 1))  # popped first
        return None

    def walk(self) -> Iterator[tuple[str, T]]:
        """Every (name, value) in printout order (defaults.md §8.3).

        At each level: the ``>`` entry, then the ``*`` entry and everything below it, then
        each literal token (sorted by UTF-8 bytes, which is code point order) with its
        entry and everything below it.
        """
        stack: list[_Node[T]] = []

        def push_children(level: _Level[T]) -> None:
            # Reverse order: the stack pops the last pushed first.
            literals = level.literals
            stack.extend([literals[token] for token in sorted(literals, reverse=True)])
            if level.star is not None:
                stack.append(level.star)
            if level.gt is not None:
                stack.append(level.gt)

        push_children(self._root)
        while stack:
            node = stack.pop()
            if node.has_value:
                yield node.name, node.value
            if node.next is not None:
                push_children(node.next)
