"""Channels: their stores, their subscriptions, and their lifecycle timers.

A channel is created by the first publish or subscription naming it (up to
``max_channels``). Two timers may run per channel: message expiration (``max_age``),
and deletion after ``max_inactivity`` without active subscriptions (protocol.md §13).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import partial

from stanpkg.plan.limits import Limits
from stanpkg.server import errors
from stanpkg.server.subscriptions import QueueGroup, Subscription
from stanpkg.server.wire import ack_prefix
from stanpkg.stores.base import BEGINS_FLUSH, DEDUPLICATES, ChannelStore, Store, StoreError

__all__ = ["Channel", "ChannelError", "ChannelRegistry"]


class ChannelError(Exception):
    """Channel lookup/creation refused; the text goes to the client."""


class Channel:
    __slots__ = (
        "ack_prefix",
        "age_timer",
        "begin_flush",
        "by_ack_inbox",
        "by_inbox",
        "dedupe",
        "deleting",
        "durables",
        "groups",
        "inactivity_timer",
        "last_activity",
        "last_ts",
        "limits",
        "msgs",
        "name",
        "plain",
        "store",
        "subs_store",
    )

    def __init__(self, store: ChannelStore) -> None:
        self.name = store.name
        self.ack_prefix = ack_prefix(store.name)  # recognizes this channel's acks cheaply
        self.store = store
        self.msgs = store.msgs
        # The message store's capabilities, resolved once for the publish path: the
        # publish IDs it remembers, and its writes started now and awaited later (a
        # store without them flushes when awaited).
        deduplicating = store.msgs.capability(DEDUPLICATES)
        self.dedupe: Callable[[str], bool] | None = (
            deduplicating.has_guid if deduplicating is not None else None
        )
        pipelining = store.msgs.capability(BEGINS_FLUSH)
        self.begin_flush: Callable[[], Awaitable[None]] = (
            pipelining.begin_flush if pipelining is not None else store.msgs.flush
        )
        self.subs_store = store.subs
        self.limits: Limits = store.limits
        self.plain: list[Subscription] = []  # plain subscriptions and online durables
        self.durables: dict[str, Subscription] = {}  # online and offline, by durable key
        self.groups: dict[str, QueueGroup] = {}
        self.by_ack_inbox: dict[str, Subscription] = {}
        self.by_inbox: dict[str, Subscription] = {}
        self.last_ts = store.msgs.last_timestamp
        self.age_timer: asyncio.TimerHandle | None = None
        self.inactivity_timer: asyncio.TimerHandle | None = None
        self.last_activity = 0  # Unix ns of the last message or of the timer start
        self.deleting = False

    def has_active_subs(self) -> bool:
        """Online subscriptions (offline durables and shadows do not count)."""
        if self.plain:
            return True
        return any(group.members for group in self.groups.values())

    def all_subscriptions(self) -> Iterator[Subscription]:
        """Every subscription known to the channel: online, offline durables, shadows."""
        seen: set[int] = set()
        for sub in self.plain:
            seen.add(id(sub))
            yield sub
        for sub in self.durables.values():
            if id(sub) not in seen:
                yield sub
        for group in self.groups.values():
            yield from group.members
            if group.shadow is not None:
                yield group.shadow

    def index_sub(self, sub: Subscription) -> None:
        self.by_ack_inbox[sub.ack_inbox] = sub
        self.by_inbox[sub.inbox] = sub

    def unindex_sub(self, sub: Subscription) -> None:
        if self.by_ack_inbox.get(sub.ack_inbox) is sub:
            del self.by_ack_inbox[sub.ack_inbox]
        if self.by_inbox.get(sub.inbox) is sub:
            del self.by_inbox[sub.inbox]

    def cancel_timers(self) -> None:
        for handle in (self.age_timer, self.inactivity_timer):
            if handle is not None:
                handle.cancel()
        self.age_timer = self.inactivity_timer = None


class ChannelRegistry:
    """All channels, with case-conflict detection (v0.25) and lifecycle timers."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        on_expired_inactivity: Callable[[Channel], None],
        on_created: Callable[[Channel], None] | None = None,
        on_readable: Callable[[Channel], None] | None = None,
    ) -> None:
        self.store = store
        # A store reading on demand tells when what deliveries waited for was read.
        self._on_readable = on_readable
        self.loop = loop
        self.channels: dict[str, Channel] = {}
        self._folded: dict[str, str] = {}  # lower-cased name → actual name
        self._on_expired_inactivity = on_expired_inactivity
        self._on_created = on_created

    def __len__(self) -> int:
        return len(self.channels)

    def get(self, name: str) -> Channel | None:
        return self.channels.get(name)

    def lookup_or_create(self, name: str) -> Channel:
        channel = self.channels.get(name)
        if channel is not None:
            if channel.deleting:
                raise ChannelError(errors.CHANNEL_BEING_DELETED)
            return channel
        existing = self._folded.get(name.lower())
        if existing is not None:
            raise ChannelError(errors.case_conflict(name, existing))
        try:
            store = self.store.create_channel(name)
        except StoreError as exc:
            raise ChannelError(str(exc)) from None
        channel = self.attach(store)
        if self._on_created is not None:
            self._on_created(channel)
        self.start_inactivity_timer(channel)
        return channel

    def attach(self, store: ChannelStore) -> Channel:
        """Register a channel whose stores exist (creation or recovery)."""
        channel = Channel(store)
        if self._on_readable is not None:
            with contextlib.suppress(AttributeError):  # a compiled store has no such hook
                store.msgs.on_readable = partial(self._on_readable, channel)
        self.channels[channel.name] = channel
        self._folded[channel.name.lower()] = channel.name
        return channel

    def remove(self, channel: Channel) -> None:
        channel.cancel_timers()
        if self.channels.get(channel.name) is channel:
            del self.channels[channel.name]
            self._folded.pop(channel.name.lower(), None)

    # -- max_age ----------------------------------------------------------------------

    def arm_age_timer(self, channel: Channel) -> None:
        """After storing: make sure the oldest message's expiry is scheduled."""
        if channel.limits.max_age <= 0 or channel.age_timer is not None:
            return
        if channel.msgs.loading:  # a clustered promotion: armed once its figures are read
            self.loop.create_task(self._arm_once_loaded(channel))
            return
        self._expire(channel)

    async def _arm_once_loaded(self, channel: Channel) -> None:
        with contextlib.suppress(StoreError):  # not loaded: the node steps down
            await channel.msgs.wait_loaded()
            self.arm_age_timer(channel)

    def _expire(self, channel: Channel) -> None:
        channel.age_timer = None
        if self.channels.get(channel.name) is not channel:
            return
        max_age = channel.limits.max_age
        now = time.time_ns()
        oldest = channel.msgs.expire(now)
        if oldest:
            delay = max(0.0, (oldest + max_age - now) / 1e9)
            channel.age_timer = self.loop.call_later(delay, self._expire, channel)

    # -- max_inactivity ----------------------------------------------------------------

    def start_inactivity_timer(self, channel: Channel) -> None:
        """Called when a channel is created or loses its last active subscription."""
        max_inactivity = channel.limits.max_inactivity
        if max_inactivity <= 0 or channel.deleting or channel.has_active_subs():
            return
        channel.last_activity = time.time_ns()
        self._arm_inactivity(channel, max_inactivity / 1e9)

    def stop_inactivity_timer(self, channel: Channel) -> None:
        if channel.inactivity_timer is not None:
            channel.inactivity_timer.cancel()
            channel.inactivity_timer = None

    def _arm_inactivity(self, channel: Channel, delay: float) -> None:
        if channel.inactivity_timer is not None:
            channel.inactivity_timer.cancel()
        channel.inactivity_timer = self.loop.call_later(delay, self._inactivity_fired, channel)

    def _inactivity_fired(self, channel: Channel) -> None:
        channel.inactivity_timer = None
        if self.channels.get(channel.name) is not channel or channel.has_active_subs():
            return
        max_inactivity = channel.limits.max_inactivity
        idle = time.time_ns() - channel.last_activity
        if idle < max_inactivity:
            self._arm_inactivity(channel, (max_inactivity - idle) / 1e9)
            return
        channel.deleting = True
        self._on_expired_inactivity(channel)
