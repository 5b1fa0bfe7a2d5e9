"""Channel limits re-applied at recovery (spec/filestore.md §8, §10.1 step c).

The limits are the plan's :class:`~stanpkg.plan.limits.Limits` (``max_age`` in
nanoseconds); only ``max_msgs``, ``max_bytes`` and ``max_age`` matter here. Removal is
logical: it only moves the channel's first sequence (and the per-slice count of removed
leading messages). A fully removed slice is dropped unless it is the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from stanpkg.plan.limits import Limits, StoreLimits
from stanpkg.stores.file.format.index import INDEX_RECORD, MSG_RECORD_OVERHEAD, index_position
from stanpkg.stores.file.format.slices import SliceInfo
from stanpkg.stores.limit_policy import drops_oldest, expired

__all__ = ["NO_LIMITS", "ChannelExtent", "LimitsSpec", "apply_limits", "limits_for"]

NO_LIMITS = Limits(max_subs=0, max_msgs=0, max_bytes=0, max_age=0, max_inactivity=0)
# One value for every channel, the store's limits (their per-channel inheritance), a
# per-channel mapping (a channel missing from it is unlimited), or any resolver.
LimitsSpec = Limits | StoreLimits | Mapping[str, Limits] | Callable[[str], Limits] | None


def limits_for(spec: LimitsSpec, channel: str) -> Limits:
    """The effective limits of ``channel`` under ``spec`` (None = unlimited)."""
    if spec is None:
        return NO_LIMITS
    if isinstance(spec, Limits):
        return spec
    if isinstance(spec, StoreLimits):
        return spec.for_channel(channel)
    if isinstance(spec, Mapping):
        return spec.get(channel, NO_LIMITS)
    return spec(channel)


@dataclass(frozen=True, slots=True)
class ChannelExtent:
    first_seq: int
    last_seq: int
    count: int
    total_bytes: int
    slices: tuple[SliceInfo, ...]
    # Slices whose every message was removed (still on disk until the server deletes or
    # archives them); readers of removed messages need them.
    dropped: tuple[SliceInfo, ...] = ()


def apply_limits(
    slices: Sequence[SliceInfo],
    indexes: Sequence[bytes],
    limits: Limits,
    now_ns: int,
) -> ChannelExtent:
    """First/last sequence, count and bytes after count/size limits then age expiration.

    ``indexes[i]`` is the index image of ``slices[i]`` (sizes/timestamps of removed
    messages are read from it, as the reference does).
    """
    if not slices:
        return ChannelExtent(0, 0, 0, 0, ())
    live = list(slices)
    images = list(indexes)
    removed = [0] * len(live)
    count = sum(s.count for s in live)
    total = sum(s.total_bytes for s in live)
    head = 0  # index in `live` of the first slice still referenced
    first = live[0].first_seq
    last = live[-1].last_seq

    def entry(k: int) -> tuple[int, int]:
        """(size, timestamp) of the first live message of slice ``k``."""
        _, _, ts, size, _ = INDEX_RECORD.unpack_from(images[k], index_position(removed[k]))
        return size, ts

    def remove_first() -> None:
        nonlocal head, count, total, first
        size, _ = entry(head)
        removed[head] += 1
        count -= 1
        total -= size + MSG_RECORD_OVERHEAD
        first += 1
        if removed[head] == live[head].count and head < len(live) - 1:
            head += 1
            first = live[head].first_seq  # tolerate gaps between slices

    while drops_oldest(limits, count, total):
        remove_first()
    if limits.max_age > 0:
        while count > 0 and expired(limits, entry(head)[1], now_ns):
            remove_first()
    if count == 0:
        first = last + 1
    kept = tuple(replace(s, removed=r) for s, r in zip(live[head:], removed[head:], strict=True))
    dropped = tuple(replace(s, removed=s.count) for s in live[:head])
    return ChannelExtent(first, last, count, total, kept, dropped)
