"""The cluster's records (server info, clients, subscriptions) in one replicated KV bucket,
written in pipelined batches: every write of a batch in flight at once, one ack each; read
whole by batched direct gets. Both on the store's one connection (``connection``); the
bucket is ``kv_bucket``'s, its keys are made by :func:`layout.kv_key`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import (
    API_TIMEOUT,
    ASK_AGAIN_EVERY,
    ConnectionClosed,
    Outgoing,
    Pipeline,
    first_answer,
)
from stanpkg.stores.jetstream.kv_bucket import DELETE, KV_OPERATION, REMOVED, ensure_bucket
from stanpkg.stores.jetstream.layout import checked_key, kv_stream, kv_subject
from stanpkg.stores.jetstream.stream_reader import ReplicaBehind, read_range, stream_state
from stanpkg.transport.connection import NatsConnection, decode_headers

__all__ = ["ReplicatedMap"]

WRITE_BUDGET = 10.0  # seconds of retries while the bucket elects a new leader
RETRY_INTERVAL = 0.25
_DELETE_HEADERS = {KV_OPERATION: DELETE}


class ReplicatedMap:
    """A KV bucket read whole at start-up, then written through :meth:`put` /
    :meth:`delete` (queued; the last write of a key wins) and :meth:`flush`."""

    def __init__(self, conn: NatsConnection, bucket: str) -> None:
        self._conn = conn
        self._writes = Pipeline(conn)
        self.bucket = bucket
        self._queued: dict[str, bytes | None] = {}  # None: delete
        # Raises StoreError when this node may no longer write (checked before each round).
        self.fence: Callable[[], None] | None = None

    @classmethod
    async def open(cls, conn: NatsConnection, bucket: str, *, replicas: int) -> ReplicatedMap:
        """The bucket, created (history 1) if missing."""
        try:
            await ensure_bucket(conn, bucket, replicas=replicas)
        except (StoreError, TimeoutError) as exc:
            raise StoreError(f"unable to open the cluster state {bucket!r}: {exc}") from exc
        return cls(conn, bucket)

    async def load(self, leader_timeout: float = API_TIMEOUT) -> dict[str, bytes]:
        """Every live key and its value: the bucket's messages (history 1: the last of each
        key) by batched direct gets, which any replica answers. Not through a consumer:
        creating one needs JetStream's metadata leader, which is being elected for 4-9 s
        when the node that died led it too. A direct get may come from a replica that is
        behind (a node that just rejoined): ReplicaBehind unless what it returned reaches
        the bucket's last sequence as its stream leader reports it; StoreError when the
        bucket's stream has no leader that answers within ``leader_timeout``."""
        name = kv_stream(self.bucket)
        prefix = kv_subject(self.bucket)
        found: dict[str, bytes] = {}
        newest = 0
        try:
            state = await first_answer(
                lambda: stream_state(self._conn, name),
                timeout=leader_timeout,
                every=ASK_AGAIN_EVERY,
                woken_by=self._conn,
            )
            async for sequence, headers, data in read_range(
                self._conn, name, state.first_seq, state.last_seq
            ):
                newest = sequence
                fields = decode_headers(headers)[1]
                key = fields.get("Nats-Subject", "").removeprefix(prefix)
                if fields.get(KV_OPERATION) in REMOVED:
                    found.pop(key, None)
                else:
                    found[key] = data
        except ReplicaBehind:
            raise
        except (StoreError, TimeoutError) as exc:
            raise StoreError(f"unable to read the cluster state {self.bucket!r}: {exc}") from exc
        if newest < state.last_seq:
            raise ReplicaBehind(
                f"the cluster state {self.bucket!r} read here ends at {newest}, its leader "
                f"has {state.last_seq}: this replica is catching up"
            )
        return found

    def put(self, key: str, value: bytes) -> None:
        self._queued[checked_key(key)] = value

    def delete(self, key: str) -> None:
        self._queued[checked_key(key)] = None

    @property
    def queued(self) -> int:
        return len(self._queued)

    async def flush(self, budget: float = WRITE_BUDGET) -> None:
        """Write everything queued, every write in flight at once, and wait for every
        ack. What failed is retried for ``budget`` seconds (a bucket whose leader died
        elects a new one); then StoreError, the failed writes kept for the next flush."""
        if not self._queued:
            return
        batch, self._queued = self._queued, {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while True:
            if self.fence is not None:
                try:
                    self.fence()
                except StoreError:
                    for key, value in batch.items():  # kept, as a failed write
                        self._queued.setdefault(key, value)
                    raise
            items = list(batch.items())
            results = await self._writes.publish_all(
                [self._write(key, value) for key, value in items], timeout=API_TIMEOUT
            )
            failed = {
                key: value
                for (key, value), result in zip(items, results, strict=True)
                if isinstance(result, Exception)
            }
            if not failed:
                return
            first = next(r for r in results if isinstance(r, Exception))
            closed = isinstance(first, ConnectionClosed) or self._conn.is_closed
            if closed or loop.time() >= deadline:
                for key, value in failed.items():  # a newer write of the key wins
                    self._queued.setdefault(key, value)
                raise StoreError(self._failure(len(failed), first, closed))
            await asyncio.sleep(RETRY_INTERVAL)
            # A key written again meanwhile goes out with its newer value at the next flush.
            batch = {key: value for key, value in failed.items() if key not in self._queued}
            if not batch:
                return

    def _write(self, key: str, value: bytes | None) -> Outgoing:
        subject = kv_subject(self.bucket, key)
        return (subject, b"", _DELETE_HEADERS) if value is None else (subject, value, None)

    def _failure(self, count: int, first: BaseException, closed: bool) -> str:
        if closed:
            return (
                f"unable to replicate {count} record(s) to {self.bucket!r}: "
                f"the connection to JetStream at {self._conn.client_url} is closed"
            )
        return f"unable to replicate {count} record(s) to {self.bucket!r}: {first!r}"
