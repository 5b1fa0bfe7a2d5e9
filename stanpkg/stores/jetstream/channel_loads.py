"""A promotion's channels, loaded one by one: each channel serves as soon as its own shared
stream has a leader and its figures are read, not once the last stream of the cluster
has one and every channel is read.

After a host's death every stream its nats-server led elects a new leader on its own
(4-9 s each, at random, not tunable). A promotion that waited for all of them stalled
every channel for the slowest election of the cluster's streams; loaded this way, a
channel stalls for the lease, the records and its own stream, as a channel of the
reference stalls for its own Raft group.

Per shared stream, side by side: the stream ensured (created or checked: it answers once
it has a leader) and its leader's move to this node begun (``on_ensured``). Then each of
its channels: figures read (``promotion.read_figures``), restored, limits applied, and
released (``ReplicatedMessages.finish_loading``); the server holds its publishes and
subscriptions until then (``MessageStore.loading``). CONCURRENT_READS channels are read
at once, in turn; a channel that a publish or a subscription waits for goes first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.promotion import Patience, read_figures
from stanpkg.stores.jetstream.record_codec import ChannelState
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.shared_streams import SharedStreams

__all__ = ["ChannelLoads"]

CONCURRENT_READS = 256  # channels whose figures are asked for at once


class ChannelLoads:
    """The loads of one promotion. ``on_ensured(stream name)``: a stream answered;
    ``on_loaded(channel name)``: a channel was restored (its figures may need writing);
    ``on_failed(reason)``: a stream or a channel could not be loaded within the
    promotion's patience (the node cannot serve it: it steps down)."""

    def __init__(
        self,
        streams: SharedStreams,
        patience: Patience,
        *,
        on_ensured: Callable[[str], None],
        on_loaded: Callable[[str], None],
        on_failed: Callable[[str], None],
    ) -> None:
        self._streams = streams
        self._patience = patience
        self._on_ensured = on_ensured
        self._on_loaded = on_loaded
        self._on_failed = on_failed
        loop = asyncio.get_running_loop()
        self._ensured = [loop.create_future() for _ in range(streams.count)]
        self._tasks: list[asyncio.Task[None]] = []
        self._slots = asyncio.Semaphore(CONCURRENT_READS)
        # New channels of a stream that has not answered yet, loading until it does.
        self._new: dict[int, list[ReplicatedMessages]] = {}

    def start(
        self,
        channels: Mapping[int, Mapping[str, ReplicatedMessages]],
        states: Mapping[str, ChannelState],
    ) -> None:
        """Load every stream (``channels``: its channels by name, each put in its loading
        state here), side by side."""
        for by_name in channels.values():
            for name, msgs in by_name.items():
                recorded = states.get(name) or ChannelState()
                msgs.start_loading(recorded.msgs, recorded.bytes, recorded.first, recorded.last)
        loop = asyncio.get_running_loop()
        for index in range(self._streams.count):
            task = loop.create_task(self._load(index, dict(channels.get(index, {})), states))
            self._tasks.append(task)

    async def ensured(self, index: int) -> None:
        """Once stream ``index`` answered (a new channel's first write waits for it)."""
        await asyncio.shield(self._ensured[index])

    def created(self, index: int, msgs: ReplicatedMessages) -> None:
        """A channel created while serving: loading (its publishes held by the server,
        not stuck in a write ahead of other channels') until stream ``index`` answers."""
        ensured = self._ensured[index]
        if ensured.done() and not ensured.cancelled() and ensured.exception() is None:
            return
        msgs.start_loading(0, 0, 0, 0)
        if ensured.done():
            msgs.finish_loading(_failure(ensured))
        else:
            self._new.setdefault(index, []).append(msgs)

    async def wait(self) -> None:
        """Until every stream is loaded (or failed)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()
        for ensured in self._ensured:
            if not ensured.done():
                ensured.cancel()

    async def _load(
        self,
        index: int,
        channels: dict[str, ReplicatedMessages],
        states: Mapping[str, ChannelState],
    ) -> None:
        streams = self._streams
        try:

            async def ensure(timeout: float) -> None:
                await streams.ensure(index, timeout)

            await self._patience.run(ensure)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure fails the stream's channels, none is lost
            reason = f"unable to load stream {streams.name(index)}: {exc}"
            self._ensured[index].set_exception(StoreError(reason))
            self._ensured[index].exception()  # retrieved: a new channel may never ask
            for msgs in [*channels.values(), *self._new.pop(index, ())]:
                msgs.finish_loading(StoreError(reason))
            self._on_failed(reason)
            return
        self._ensured[index].set_result(None)
        self._on_ensured(streams.name(index))
        for new in self._new.pop(index, ()):
            new.finish_loading()
        await asyncio.gather(
            *(self._load_channel(name, msgs, states) for name, msgs in channels.items())
        )

    async def _load_channel(
        self, name: str, msgs: ReplicatedMessages, states: Mapping[str, ChannelState]
    ) -> None:
        took_slot = await self._turn(msgs.wanted)
        try:
            recorded = states.get(name) or ChannelState()
            figures = await read_figures(msgs.channel_log, recorded, self._patience)
            msgs.restore(figures, time.time_ns())
            await msgs.apply_limits()  # reads only when its limits bind (they changed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = f"unable to load channel {name!r}: {exc}"
            msgs.finish_loading(StoreError(reason))
            self._on_failed(reason)
            return
        finally:
            if took_slot:
                self._slots.release()
        msgs.finish_loading()
        self._on_loaded(name)

    async def _turn(self, wanted: asyncio.Event) -> bool:
        """Until a slot is free or the channel is wanted (it then goes at once, beside
        the others); whether a slot was taken."""
        if wanted.is_set():
            return False
        slot = asyncio.ensure_future(self._slots.acquire())
        want = asyncio.ensure_future(wanted.wait())
        try:
            await asyncio.wait((slot, want), return_when=asyncio.FIRST_COMPLETED)
        finally:
            want.cancel()
            if not slot.done():
                slot.cancel()
        return slot.done() and not slot.cancelled()


def _failure(future: asyncio.Future[None]) -> StoreError:
    exc = future.exception() if not future.cancelled() else None
    return exc if isinstance(exc, StoreError) else StoreError("the promotion was cancelled")
