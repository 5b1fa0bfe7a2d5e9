"""What a standby node shows of the cluster's state: monitoring on a follower.

The reference's followers apply the Raft log, so their ``/streaming/*`` endpoints answer
with the cluster's state. Ours hold nothing: they read the replicated records — clients,
channels, each channel's figures (``state.<channel>``, written by the serving node when
they change) and subscriptions — by direct gets over the KV bucket, which any replica
answers. Nothing is read on a timer: a reading starts when monitoring asks for the state
and the last one is older than READ_TTL, in the background (monitoring never waits), and
monitoring shows the last reading. Only until a first reading has found the cluster's
server info is one made every RETRY_INTERVAL (a standby holding the publishes sent while
no node serves needs the cluster's publish subject). A reading that fails (no quorum, a
replica catching up) leaves the last one in place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from stanpkg.stores.base import StandbyChannel, StandbyState, StandbySubscription, StoreLog
from stanpkg.stores.jetstream.connection import raise_if_cancelled
from stanpkg.stores.jetstream.record_codec import ChannelState, decode_records
from stanpkg.stores.jetstream.records_map import ReplicatedMap

__all__ = ["READ_TTL", "StandbyView", "read_standby_state"]

READ_TTL = 1.0  # seconds a reading is shown before monitoring's next request reads again
RETRY_INTERVAL = 2.0  # seconds between readings until one found the server info
READ_TIMEOUT = 10.0  # one whole reading, past which it counts as failed

Reader = Callable[[], Awaitable[StandbyState | None]]


async def read_standby_state(records: ReplicatedMap, now: float) -> StandbyState | None:
    """One reading of the cluster's state; None before the serving node has written its
    server info. Raises StoreError (or a NATS error) when JetStream cannot answer."""
    decoded = decode_records(await records.load())
    if decoded is None:
        return None
    channels = []
    for name in decoded.channels:
        state = decoded.states.get(name, ChannelState())
        subs = tuple(
            StandbySubscription(sub.record, len(sub.pending)) for sub in decoded.subs.get(name, ())
        )
        channels.append(
            StandbyChannel(name, state.msgs, state.bytes, state.first, state.last, subs)
        )
    clients = sorted(decoded.clients, key=lambda client: client.id)
    return StandbyState(decoded.info, tuple(clients), tuple(channels), now)


class StandbyView:
    """The last reading of the cluster's state (:meth:`current`), read again on request
    when older than ``ttl``, between :meth:`start` and :meth:`stop`."""

    def __init__(self, read: Reader, log: StoreLog, ttl: float = READ_TTL) -> None:
        self._read = read
        self._log = log
        self._ttl = ttl
        self._task: asyncio.Task[None] | None = None
        self._running = False
        self._read_at = -float("inf")  # when the last reading began (loop time)
        self._failing = False
        self.latest: StandbyState | None = None

    def start(self) -> None:
        """Read now, and again every RETRY_INTERVAL until the server info is known."""
        self._running = True
        self._refresh(retrying=True)

    def stop(self) -> None:
        """Stops reading and forgets the state (the node serves from its own now)."""
        self._running = False
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.latest = None

    def current(self) -> StandbyState | None:
        """The last reading, at once; a new one starts in the background when it is
        older than the time to live."""
        if self._running and asyncio.get_running_loop().time() - self._read_at >= self._ttl:
            self._refresh(retrying=False)
        return self.latest

    def _refresh(self, *, retrying: bool) -> None:
        if self._task is None or self._task.done():
            self._read_at = asyncio.get_running_loop().time()
            self._task = asyncio.get_running_loop().create_task(self._read_once(retrying))

    async def _read_once(self, retrying: bool) -> None:
        try:
            state = await asyncio.wait_for(self._read(), READ_TIMEOUT)
        except Exception as exc:  # whatever JetStream answered: the last reading stays
            raise_if_cancelled()
            if not self._failing:
                self._log.warn(
                    "Unable to read the cluster's state for monitoring "
                    f"(the last known is shown): {exc or type(exc).__name__}"
                )
            self._failing = True
            state = None
        else:
            if self._failing:
                self._log.notice("Reading the cluster's state for monitoring again")
            self._failing = False
            if state is not None:
                self.latest = state
        if retrying and self.latest is None and self._running:
            await asyncio.sleep(RETRY_INTERVAL)
            self._task = None
            self._refresh(retrying=True)
