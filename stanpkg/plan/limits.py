"""Store limits: per-channel inheritance (defaults.md §2.2) and the printout (§8).

Values are ints; 0 means unlimited; durations are nanoseconds. Validation (negative
globals, too many channels, invalid names) belongs to the caller: everything here is
total, so a caller can always print what it resolved, even for a configuration it is
about to reject.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from functools import cached_property

from stanpkg.plan.options import int_default
from stanpkg.plan.subjects import SEPARATOR, SubjectTree
from stanpkg.plan.units import LimitKind, render_limit_value


@dataclass(frozen=True, slots=True)
class Limits:
    """Resolved per-channel limits; 0 = unlimited, durations in nanoseconds."""

    max_subs: int
    max_msgs: int
    max_bytes: int
    max_age: int
    max_inactivity: int


# The options table's defaults, which the printout's `*` marks.
DEFAULT_LIMITS = Limits(*(int_default(f"store_limits.{f.name}") for f in fields(Limits)))
DEFAULT_MAX_CHANNELS = int_default("store_limits.max_channels")


@dataclass(frozen=True, slots=True)
class PartialLimits:
    """One per-channel map as written in a configuration file.

    None = key absent (inherit from the parent); 0 = unlimited; negative = unlimited.
    """

    max_subs: int | None = None
    max_msgs: int | None = None
    max_bytes: int | None = None
    max_age: int | None = None
    max_inactivity: int | None = None


@dataclass(frozen=True)
class ChannelLimits:
    """A per-channel entry after inheritance.

    ``level`` is the entry's index in its own match list, ``parent`` the limits of the
    entry before it there (the global limits at level 0) and ``parent_name`` that entry's
    name ("" for the global limits): the chain a value was inherited through.
    """

    name: str
    limits: Limits
    level: int
    parent: Limits
    parent_name: str = ""


@dataclass(frozen=True)
class StoreLimits:
    """The global limits and every per-channel entry, resolved."""

    max_channels: int
    defaults: Limits
    channels: tuple[ChannelLimits, ...]  # in printout order

    @cached_property
    def _tree(self) -> SubjectTree[ChannelLimits]:
        # Built on first use: validation only renders, the runtime only looks up.
        tree: SubjectTree[ChannelLimits] = SubjectTree()
        for channel in self.channels:
            tree.insert(channel.name, channel)
        return tree

    def for_channel(self, channel: str) -> Limits:
        """Limits of a channel created at run time: the narrowest matching entry's, or
        the global limits when no entry matches."""
        found = self._tree.lookup_narrowest(channel)
        return self.defaults if found is None else found.limits

    def entry_for(self, channel: str) -> ChannelLimits | None:
        """The entry whose limits :meth:`for_channel` gives (None: the global limits).
        ``*`` and ``>`` in ``channel`` are plain tokens, so for an entry's name absent
        here this is the entry it would inherit from."""
        return self._tree.lookup_narrowest(channel)


# (field, printout label, value kind), in printout order.
_FIELDS: tuple[tuple[str, str, LimitKind], ...] = (
    ("max_subs", "Subscriptions", "count"),
    ("max_msgs", "Messages", "count"),
    ("max_bytes", "Bytes", "bytes"),
    ("max_age", "Age", "duration"),
    ("max_inactivity", "Inactivity", "duration"),
)
assert tuple(f[0] for f in _FIELDS) == tuple(f.name for f in fields(Limits))


def _inherit(own: PartialLimits, parent: Limits) -> Limits:
    """Absent → the parent's value; 0 or negative → 0 (unlimited); positive → itself."""
    # Spelled out field by field: this runs once per entry (100k-channel configs).
    return Limits(
        parent.max_subs if own.max_subs is None else max(own.max_subs, 0),
        parent.max_msgs if own.max_msgs is None else max(own.max_msgs, 0),
        parent.max_bytes if own.max_bytes is None else max(own.max_bytes, 0),
        parent.max_age if own.max_age is None else max(own.max_age, 0),
        parent.max_inactivity if own.max_inactivity is None else max(own.max_inactivity, 0),
    )


def resolve_store_limits(
    max_channels: int, defaults: Limits, per_channel: Mapping[str, PartialLimits]
) -> StoreLimits:
    """Apply inheritance to the per-channel maps; entries come out in printout order.

    An entry's parent is the entry just before it in its own match list, or the global
    limits if it comes first. Walking widest to narrowest resolves every parent before
    its children (a ``*`` entry that follows a ``>`` sibling in the ``>`` entry's match
    list also follows it in the walk). A name absent from its own match list (only
    possible for invalid names such as ``a.>.b``) is treated as level 0.
    """
    tree: SubjectTree[int] = SubjectTree()
    names = list(per_channel)
    for index, name in enumerate(names):
        tree.insert(name, index)
    resolved: dict[int, Limits] = {}
    channels: list[ChannelLimits] = []
    for name, index in tree.walk():
        matches = tree.match_list(name)
        level = _own_position(matches, index)
        # The parent is always resolved by now; .get() only keeps this total.
        parent = defaults if level == 0 else resolved.get(matches[level - 1], defaults)
        parent_name = names[matches[level - 1]] if level else ""
        limits = resolved[index] = _inherit(per_channel[name], parent)
        channels.append(ChannelLimits(name, limits, level, parent, parent_name))
    return StoreLimits(max_channels, defaults, tuple(channels))


def _own_position(matches: list[int], index: int) -> int:
    # The entry is usually last (never earlier than next to last), so search backwards.
    for position in range(len(matches) - 1, -1, -1):
        if matches[position] == index:
            return position
    return 0


STORE_LIMITS_TITLE = "---------- Store Limits ----------"
CHANNELS_LIMITS_TITLE = "--------- Channels Limits --------"
_LIST_TITLE = " List of Channels "
_VALUE_WIDTH = 13
_LABEL_WIDTH = 14


def _go_len(text: str) -> int:
    """Go's ``len()``: UTF-8 bytes."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _global_value(value: int, default: int, kind: LimitKind) -> str:
    marker = " *" if value == default else ""
    return f"{render_limit_value(value, kind):>{_VALUE_WIDTH}}{marker}"


def _channel_lines(channel: ChannelLimits, max_levels: int) -> Iterator[str]:
    indent = " " * channel.level
    pad = " " * max(0, max_levels - channel.level)
    yield indent + channel.name
    for name, label, kind in _FIELDS:
        value = getattr(channel.limits, name)
        if value != getattr(channel.parent, name):
            text = render_limit_value(value, kind)
            yield f"{indent} |-> {label:<{_LABEL_WIDTH}}{pad}{text:>{_VALUE_WIDTH}}"


def render_store_limits(sl: StoreLimits) -> list[str]:
    """The printout lines, without the ``STREAM: `` prefix (defaults.md §8.1-8.5)."""
    g, d = sl.defaults, DEFAULT_LIMITS
    lines = [
        STORE_LIMITS_TITLE,
        f"Channels:        {_global_value(sl.max_channels, DEFAULT_MAX_CHANNELS, 'count')}",
        CHANNELS_LIMITS_TITLE,
        f"  Subscriptions: {_global_value(g.max_subs, d.max_subs, 'count')}",
        f"  Messages     : {_global_value(g.max_msgs, d.max_msgs, 'count')}",
        f"  Bytes        : {_global_value(g.max_bytes, d.max_bytes, 'bytes')}",
        f"  Age          : {_global_value(g.max_age, d.max_age, 'duration')}",
        f"  Inactivity   : {_global_value(g.max_inactivity, d.max_inactivity, 'duration')}",
    ]
    width = len(STORE_LIMITS_TITLE)  # the global lines never widen the frame
    if sl.channels:
        max_levels = max(c.name.count(SEPARATOR) + 1 for c in sl.channels)
        channel_lines = [
            line for channel in sl.channels for line in _channel_lines(channel, max_levels)
        ]
        width = max(width, max(map(_go_len, channel_lines)))
        left = (width - len(_LIST_TITLE)) // 2
        right = width - len(_LIST_TITLE) - left
        lines.append("-" * left + _LIST_TITLE + "-" * right)
        lines.extend(channel_lines)
    lines.append("-" * width)
    return lines
