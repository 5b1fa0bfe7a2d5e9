"""The channel limit policy, once for every store (the Go server keeps it in
``stores/common.go``): while a channel is over ``max_msgs`` or ``max_bytes`` its oldest
message goes, but never its last one; a message ``max_age`` old goes; the first time a
channel goes over, its store warns once, in the reference's words. 0 is unlimited.

The stores run these on every publish batch and at recovery; how a message is removed
is each store's own business."""

from __future__ import annotations

from typing import Protocol

from stanpkg.plan.limits import Limits
from stanpkg.plan.units import friendly_bytes

__all__ = ["LimitsWarning", "drops_oldest", "expired", "limits_reached", "over_count_or_size"]


def over_count_or_size(limits: Limits, count: int, size: int) -> bool:
    """Whether a channel of ``count`` messages and ``size`` bytes is over its limits."""
    return 0 < limits.max_msgs < count or 0 < limits.max_bytes < size


def drops_oldest(limits: Limits, count: int, size: int) -> bool:
    """Whether the channel's oldest message must go now: over its limits, and not the
    channel's last message (a message larger than ``max_bytes`` is still kept)."""
    return count > 1 and over_count_or_size(limits, count, size)


def expired(limits: Limits, stamp: int, now: int) -> bool:
    """Whether a message stored at ``stamp`` is past ``max_age`` at ``now`` (ns)."""
    return 0 < limits.max_age <= now - stamp


def limits_reached(channel: str, limits: Limits, count: int, size: int) -> str:
    """The warning a store logs once, when a channel first goes over its count or size
    limit (the reference's text)."""
    return (
        f'Reached limits for store "{channel}" (msgs={count}/{limits.max_msgs} '
        f"bytes={friendly_bytes(size)}/{friendly_bytes(limits.max_bytes)}), "
        "dropping old messages to make room for new ones"
    )


class _Warns(Protocol):
    """The part of a store's log the warning needs (stores.base.StoreLog has it)."""

    def warn(self, text: str) -> None: ...


class LimitsWarning:
    """One channel's :func:`limits_reached`, logged the first time only: a channel at its
    limit drops messages on every publish."""

    __slots__ = ("_channel", "_given", "_log")

    def __init__(self, log: _Warns, channel: str) -> None:
        self._log = log
        self._channel = channel
        self._given = False

    def once(self, limits: Limits, count: int, size: int) -> None:
        if not self._given:
            self._given = True
            self._log.warn(limits_reached(self._channel, limits, count, size))
