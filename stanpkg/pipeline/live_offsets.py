"""Offsets of the live ``stan`` source: per channel, the last sequence already read.

Pure functions (no I/O), so the rules are tested without a server or Spark: where a query
starts, how far one micro-batch goes (maxMessagesPerTrigger, availableNow's target), and how
a micro-batch's (start, end] ranges split into partitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stanpkg.pipeline.live_client import ChannelBounds
from stanpkg.pipeline.live_options import EARLIEST, LATEST, Offsets

__all__ = [
    "SequenceRange",
    "advance",
    "ending_offsets",
    "pack_ranges",
    "split_ranges",
    "starting_offsets",
]


@dataclass(frozen=True)
class SequenceRange:
    """Messages ``start + 1 .. end`` of one channel."""

    channel: str
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


def earliest(bounds: ChannelBounds) -> int:
    """The offset before a channel's first message (what 'earliest' starts from)."""
    return max(bounds.first - 1, 0)


def starting_offsets(spec: str | Offsets, bounds: Mapping[str, ChannelBounds]) -> Offsets:
    """Where a new query starts: earliest, latest, or the given sequences (channels the
    JSON does not name start at their earliest)."""
    if spec == LATEST:
        return {c: b.last for c, b in bounds.items()}
    given = {} if spec == EARLIEST else dict(spec)  # type: ignore[arg-type]
    return {c: given.get(c, earliest(b)) for c, b in bounds.items()} | given


def ending_offsets(spec: str | Offsets, bounds: Mapping[str, ChannelBounds]) -> Offsets:
    """Where a batch read of a live server ends: latest, or the given sequences (others at
    their last)."""
    if spec == EARLIEST:
        return {c: earliest(b) for c, b in bounds.items()}
    given = {} if spec == LATEST else dict(spec)  # type: ignore[arg-type]
    return {c: min(given.get(c, b.last), b.last) for c, b in bounds.items()}


def advance(
    start: Mapping[str, int],
    bounds: Mapping[str, ChannelBounds],
    max_messages: int | None = None,
    target: Mapping[str, int] | None = None,
) -> Offsets:
    """The end offset of the next micro-batch.

    Channels not in ``start`` (new ones matching a pattern) join at their earliest offset,
    read from the next micro-batch on; a channel that vanished keeps its offset. With
    ``target`` (availableNow) nothing goes past it and no channel joins. With
    ``max_messages`` the budget is shared in proportion to each channel's backlog.
    """
    end = dict(start)
    available: dict[str, int] = {}
    for channel, b in bounds.items():
        if channel not in start:
            if target is None or channel in target:
                end[channel] = earliest(b)
            continue
        last = b.last if target is None else min(b.last, target.get(channel, start[channel]))
        if last > start[channel]:
            available[channel] = last - start[channel]
    total = sum(available.values())
    if max_messages is None or total <= max_messages:
        for channel, count in available.items():
            end[channel] = start[channel] + count
        return end
    shares = {c: max_messages * n // total for c, n in available.items()}
    spare = max_messages - sum(shares.values())
    for channel in sorted(available, key=lambda c: (-available[c], c)):
        if spare <= 0:
            break
        extra = min(spare, available[channel] - shares[channel])
        shares[channel] += extra
        spare -= extra
    for channel, count in shares.items():
        end[channel] = start[channel] + count
    return end


def split_ranges(
    start: Mapping[str, int], end: Mapping[str, int], max_per_partition: int
) -> list[SequenceRange]:
    """(start, end] of every channel that moved, cut into ranges of at most
    ``max_per_partition`` messages. A channel missing from ``start`` has nothing to read
    (it joined at this ``end``)."""
    ranges: list[SequenceRange] = []
    for channel in sorted(end):
        if channel not in start:
            continue
        lo, hi = start[channel], end[channel]
        while lo < hi:
            cut = min(hi, lo + max_per_partition)
            ranges.append(SequenceRange(channel, lo, cut))
            lo = cut
    return ranges


def pack_ranges(
    ranges: list[SequenceRange], max_per_partition: int
) -> list[tuple[SequenceRange, ...]]:
    """The ranges grouped into Spark partitions of at most ``max_per_partition`` messages,
    in order: many small channels are read by a few tasks (a task costs far more to start
    than a subscription), and a range already at the maximum is a partition of its own."""
    packed: list[tuple[SequenceRange, ...]] = []
    group: list[SequenceRange] = []
    size = 0
    for rng in ranges:
        if group and size + rng.count > max_per_partition:
            packed.append(tuple(group))
            group, size = [], 0
        group.append(rng)
        size += rng.count
    if group:
        packed.append(tuple(group))
    return packed
