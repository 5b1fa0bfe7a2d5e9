"""What a standby node shows of the cluster's state: monitoring on a follower.

The reference's followers apply the Raft log, so their ``/streaming/*`` endpoints answer
with the cluster's state. Ours hold nothing: they read it, in the background, every few
seconds while they stand by — the replicated records (direct gets over the KV
bucket) and one ``STREAM.INFO`` per channel — and monitoring shows the last reading. A
reading that fails (no quorum, a replica catching up) leaves the last one in place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from stanpkg.stores.base import StandbyChannel, StandbyState, StandbySubscription, StoreLog
from stanpkg.stores.jetstream.kvmap import ReplicatedMap
from stanpkg.stores.jetstream.layout import stream_name
from stanpkg.stores.jetstream.periodic import repeat
from stanpkg.stores.jetstream.records import decode_records
from stanpkg.stores.jetstream.stream_reader import StreamState, stream_state
from stanpkg.transport.connection import NatsConnection

__all__ = ["REFRESH_INTERVAL", "StandbyRefresher", "read_standby_state"]

REFRESH_INTERVAL = 2.0  # seconds between two readings, at least
COST_FACTOR = 4  # a reading that takes t seconds waits 4t before the next (large clusters)
READ_TIMEOUT = 10.0  # one whole reading, past which it counts as failed
CONCURRENT_INFOS = 32  # STREAM.INFO requests in flight at once

Reader = Callable[[], Awaitable[StandbyState | None]]


async def read_standby_state(
    records: ReplicatedMap, conn: NatsConnection, cluster_id: str, now: float
) -> StandbyState | None:
    """One reading of the cluster's state; None before the serving node has written its
    server info. Raises StoreError (or a NATS error) when JetStream cannot answer."""
    decoded = decode_records(await records.load())
    if decoded is None:
        return None
    names = decoded.channels
    states = await _stream_states(conn, cluster_id, names)
    channels = tuple(
        StandbyChannel(
            name,
            state.msgs,
            state.bytes,
            state.first_seq,
            state.last_seq,
            tuple(
                StandbySubscription(sub.record, len(sub.pending))
                for sub in decoded.subs.get(name, ())
            ),
        )
        for name, state in zip(names, states, strict=True)
    )
    clients = sorted(decoded.clients, key=lambda client: client.id)
    return StandbyState(decoded.info, tuple(clients), channels, now)


async def _stream_states(
    conn: NatsConnection, cluster_id: str, names: list[str]
) -> list[StreamState]:
    limit = asyncio.Semaphore(CONCURRENT_INFOS)

    async def one(name: str) -> StreamState:
        async with limit:
            return await stream_state(conn, stream_name(cluster_id, name))

    return list(await asyncio.gather(*(one(name) for name in names)))


class StandbyRefresher:
    """Reads the cluster's state in the background (``start`` .. ``stop``) and keeps the
    last reading that worked in :attr:`latest`."""

    def __init__(self, read: Reader, log: StoreLog, interval: float = REFRESH_INTERVAL) -> None:
        self._read = read
        self._log = log
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self.latest: StandbyState | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        """Stops reading and forgets the state (the node serves from its own now)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.latest = None

    async def _run(self) -> None:
        await repeat(
            self._read_once,
            interval=self._interval,
            cost_factor=COST_FACTOR,
            log=self._log,
            # Whatever JetStream answered: the last reading stays.
            failed=lambda exc: (
                "Unable to read the cluster's state for monitoring "
                f"(the last known is shown): {exc or type(exc).__name__}"
            ),
            recovered="Reading the cluster's state for monitoring again",
        )

    async def _read_once(self) -> None:
        state = await asyncio.wait_for(self._read(), READ_TIMEOUT)
        if state is not None:
            self.latest = state
