"""What the serving node replicates lazily, once a second, as the reference does: the
positions of subscriptions (sent and acknowledged sequences), each channel's figures, and
the purges of what the channels' limits dropped.

Nothing runs per channel while the cluster is idle: only the channels that changed since
the last round are visited (the channels' hooks add them to the sets here).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from stanpkg.stores.base import ChannelStore, StoreError, StoreLog
from stanpkg.stores.jetstream.paced_repeat import repeat
from stanpkg.stores.jetstream.record_codec import ChannelState, state_record
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.replicated_subs import ReplicatedSubscriptions

__all__ = ["LAZY_STATE_INTERVAL", "LazyReplication", "figures_of"]

LAZY_STATE_INTERVAL = 1.0  # sent/acked sequences are replicated lazily, as the reference
CONCURRENT_PURGES = 32  # purge requests in flight at once in one lazy round


class LazyReplication:
    """The channels (``channels``: the store's, by name) whose subscription positions
    changed, whose figures changed, whose memory dropped messages to purge; written to
    ``state()`` (None before this node leads) each round."""

    def __init__(
        self,
        channels: Mapping[str, ChannelStore],
        state: Callable[[], ReplicatedMap | None],
        log: StoreLog,
    ) -> None:
        self._channels = channels
        self._state = state
        self._log = log
        self.subs_changed: set[str] = set()
        self.states_changed: set[str] = set()
        self.dropped: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        return not (self.subs_changed or self.states_changed or self.dropped)

    def start(self) -> None:
        work = repeat(
            self.flush,
            interval=LAZY_STATE_INTERVAL,
            cost_factor=0,
            log=self._log,
            failed=lambda exc: f"Unable to replicate subscription positions: {exc}",
            recovered="Replicating subscription positions again",
            errors=(StoreError,),
        )
        self._task = asyncio.get_running_loop().create_task(work)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def replicated(self, name: str) -> ReplicatedMessages | None:
        """Channel ``name``'s messages, if it is still open here."""
        channel = self._channels.get(name)
        if channel is None:
            return None
        msgs = channel.msgs
        assert isinstance(msgs, ReplicatedMessages)
        return msgs

    async def flush(self) -> None:
        """The channels that changed since the last round, and those only: their
        subscriptions' positions and their figures, on a quorum; then the messages their
        memory dropped purged from the streams (after the figures: a channel whose every
        message goes keeps its last sequence in them). A channel still being loaded
        waits for the next round: its figures are not known yet."""
        # Taken by copy: the channels hold the sets' bound ``add``.
        subs_changed, states, purges = _take(self.subs_changed, self.states_changed, self.dropped)
        for name in subs_changed:
            channel = self._channels.get(name)
            if channel is not None:
                subs = channel.subs
                assert isinstance(subs, ReplicatedSubscriptions)
                subs.write_changed()
        state = self._state()
        if state is None:
            return
        written: list[tuple[ReplicatedMessages, int]] = []
        for name in states:
            msgs = self.replicated(name)
            if msgs is None:
                continue
            if msgs.loading:
                self.states_changed.add(name)
                continue
            figures = figures_of(msgs)
            state.put(*state_record(name, figures))
            written.append((msgs, figures.last))
        try:
            await state.flush()
        except StoreError:
            self.dropped |= purges  # not before the figures are replicated
            raise
        for msgs, last in written:
            msgs.recorded_last = max(msgs.recorded_last, last)
        await self._purge(purges)

    async def _purge(self, names: set[str]) -> None:
        limit = asyncio.Semaphore(CONCURRENT_PURGES)
        failures: list[str] = []

        async def one(name: str) -> None:
            msgs = self.replicated(name)
            if msgs is None:
                return
            if msgs.loading:
                self.dropped.add(name)
                return
            async with limit:
                purging = msgs.purge_dropped()
                failure = await purging if purging is not None else ""
            if failure:
                failures.append(failure)
                self.dropped.add(name)  # the next round tries again

        await asyncio.gather(*(one(name) for name in names))
        if failures:
            self._log.error(
                f"Unable to purge the dropped messages of {len(failures)} channel(s) "
                f"(tried again): {failures[0]}"
            )


def _take(*dirty: set[str]) -> list[set[str]]:
    """A copy of each set, each emptied."""
    taken = [set(names) for names in dirty]
    for names in dirty:
        names.clear()
    return taken


def figures_of(msgs: ReplicatedMessages) -> ChannelState:
    """A channel's figures as its memory has them."""
    count, size = msgs.state()
    return ChannelState(count, size, msgs.first_sequence, msgs.last_sequence)
