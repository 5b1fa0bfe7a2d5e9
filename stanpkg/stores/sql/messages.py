"""One channel's messages in the SQL store.

The store keeps, in memory, the timestamp and size of every stored message (16 bytes a
message), so limits, expiration and time look-ups behave exactly as in the MEMORY store
without a query. Payloads live in the database, plus:

* records not yet committed (stored since the last flush, or in the writer's hands), so
  a look-up never misses a message the store accepted;
* with caching, a bounded cache of recent and read-ahead records: deliveries right after
  a publish, and replays, seldom query the database.

Writes are statements handed to the owner at flush time (see ``SqlStore``): the batch's
INSERTs (multi-row when ``bulk_insert_limit`` ≥ 5), a DELETE of the sequences the limits
removed, and ``Channels.maxseq`` once nothing is left (so the last sequence survives).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import OrderedDict, deque
from concurrent.futures import Future
from typing import Any, Protocol

from stanpkg.plan.limits import Limits
from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores.base import (
    MessageBatch,
    MessageStore,
    SequenceBookkeeping,
    StoredRun,
    StoreError,
    StoreLog,
)
from stanpkg.stores.limit_policy import LimitsWarning, drops_oldest, expired, over_count_or_size
from stanpkg.stores.sql.db import Database, Op
from stanpkg.stores.sql.drivers import Cursor
from stanpkg.stores.sql.statements import Statements

__all__ = ["MessageIndex", "Owner", "Part", "SqlMessageStore"]

READ_AHEAD = 256
CACHE_MAX_MSGS = 8192
CACHE_MAX_BYTES = 32 * 1024 * 1024
MIN_BULK_INSERT = 5


class Part(Protocol):
    """A store whose changes the owner collects at flush time."""

    channel_id: int

    def materialize(self) -> list[Op]: ...

    def submitted(self, fut: Future[Any]) -> None: ...


class Owner(Protocol):
    db: Database
    sql: Statements
    caching: bool
    bulk_insert_limit: int

    def dirty(self, part: Part, *, soon: bool = False) -> None: ...

    def kick(self) -> Future[Any] | None: ...

    async def flush(self) -> None: ...


class MessageIndex:
    """Timestamps and sizes of the stored messages, oldest first."""

    __slots__ = ("head", "sizes", "stamps")

    def __init__(self) -> None:
        self.stamps = array("q")
        self.sizes = array("q")
        self.head = 0

    def __len__(self) -> int:
        return len(self.stamps) - self.head

    def append(self, stamp: int, size: int) -> None:
        self.stamps.append(stamp)
        self.sizes.append(size)

    def first_stamp(self) -> int:
        return self.stamps[self.head]

    def pop_front(self) -> int:
        size = self.sizes[self.head]
        self.head += 1
        if self.head >= 4096 and self.head * 2 >= len(self.stamps):
            del self.stamps[: self.head]
            del self.sizes[: self.head]
            self.head = 0
        return size

    def position(self, stamp: int) -> int:
        """How many stored messages are older than ``stamp``."""
        return bisect_left(self.stamps, stamp, lo=self.head) - self.head


class _Cache:
    """Records by sequence, least recently used evicted first."""

    def __init__(self) -> None:
        self._items: OrderedDict[int, bytes] = OrderedDict()
        self._bytes = 0

    def get(self, seq: int) -> bytes | None:
        record = self._items.get(seq)
        if record is not None:
            self._items.move_to_end(seq)
        return record

    def put(self, seq: int, record: bytes) -> None:
        old = self._items.pop(seq, None)
        if old is not None:
            self._bytes -= len(old)
        self._items[seq] = record
        self._bytes += len(record)
        while len(self._items) > CACHE_MAX_MSGS or self._bytes > CACHE_MAX_BYTES:
            self._bytes -= len(self._items.popitem(last=False)[1])

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0


class SqlMessageStore(SequenceBookkeeping, MessageStore):
    def __init__(
        self,
        owner: Owner,
        channel: str,
        channel_id: int,
        limits: Limits,
        log: StoreLog,
        *,
        first: int = 0,
        last: int = 0,
        last_timestamp: int = 0,
        index: MessageIndex | None = None,
        total_bytes: int = 0,
        maxseq: int = 0,
    ) -> None:
        self.owner = owner
        self.channel = channel
        self.channel_id = channel_id
        self.limits = limits
        self._log = log
        self._index = index if index is not None else MessageIndex()
        self._first = first
        self._last = last
        self._last_ts = last_timestamp
        self._bytes = total_bytes
        self._limits_warning = LimitsWarning(log, channel)
        self._unwritten: dict[int, bytes] = {}  # seq → record, until committed
        self._pending: list[tuple[int, int, bytes]] = []  # (seq, stamp, stored bytes)
        self._inflight: deque[tuple[Future[Any], int]] = deque()  # (job, last seq in it)
        self._cache = _Cache() if owner.caching else None
        self.deleted_upto = max(first - 1, 0)  # highest seq known gone from the table
        self.maxseq_written = maxseq  # Channels.maxseq

    # -- state ---------------------------------------------------------------------------

    def state(self) -> tuple[int, int]:
        return len(self._index), self._bytes

    # -- writes --------------------------------------------------------------------------

    def store(self, batch: MessageBatch) -> StoredRun:
        first = self._last + 1
        if not batch.messages:
            return StoredRun(first, self._last)
        self._prune()
        if not self._index:
            self._first = first
        stamp = batch.timestamp
        records = MsgEncoder(self.channel, stamp).encode_run(first, batch.messages)
        seq = self._last
        index, unwritten, pending = self._index, self._unwritten, self._pending
        for record in records:
            seq += 1
            index.append(stamp, len(record))
            self._bytes += len(record)
            unwritten[seq] = record
            pending.append((seq, stamp, record))
        self._last = seq
        self._last_ts = stamp
        self.enforce_limits(warn=True)
        self.owner.dirty(self)
        return StoredRun(first, seq)

    def enforce_limits(self, *, warn: bool) -> bool:
        """Drop the oldest messages over ``max_msgs``/``max_bytes`` (never the newest)."""
        limits = self.limits
        if not over_count_or_size(limits, len(self._index), self._bytes):
            return False
        if warn:
            self._limits_warning.once(limits, len(self._index), self._bytes)
        while drops_oldest(limits, len(self._index), self._bytes):
            self._remove_first()
        return True

    def _remove_first(self) -> None:
        self._bytes -= self._index.pop_front()
        self._unwritten.pop(self._first, None)
        self._first += 1

    def expire(self, now: int) -> int:
        limits = self.limits
        if limits.max_age <= 0:
            return 0
        removed = False
        oldest = 0
        while self._index:
            stamp = self._index.first_stamp()
            if not expired(limits, stamp, now):
                oldest = stamp
                break
            self._remove_first()
            removed = True
        if removed:
            self.owner.dirty(self)
        return oldest

    # -- flush protocol (called by the owner) --------------------------------------------

    def materialize(self) -> list[Op]:
        sql, cid = self.owner.sql, self.channel_id
        ops: list[Op] = []
        if self._first - 1 > self.deleted_upto:
            self.deleted_upto = self._first - 1
            ops.append(Op(sql.DELETE_MSGS_UPTO, (cid, self.deleted_upto)))
        first = self._first
        rows = [
            (cid, seq, stamp, len(data), data) for seq, stamp, data in self._pending if seq >= first
        ]
        self._pending = []
        if rows:
            ops.extend(self._inserts(rows))
        if not self._index and self._last > self.maxseq_written:
            self.maxseq_written = self._last
            ops.append(Op(sql.UPDATE_CHANNEL_MAXSEQ, (self._last, cid)))
        return ops

    def _inserts(self, rows: list[tuple[int, int, int, int, bytes]]) -> list[Op]:
        limit = self.owner.bulk_insert_limit
        if limit < MIN_BULK_INSERT or len(rows) == 1:
            return [Op(self.owner.sql.STORE_MSG, rows, many=True)]
        driver = self.owner.db.driver
        ops = []
        for start in range(0, len(rows), limit):
            chunk = rows[start : start + limit]
            values = ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk))
            params = [value for row in chunk for value in row]
            ops.append(Op(driver.sql(Statements.STORE_MSGS_PREFIX + values), params))
        return ops

    def submitted(self, fut: Future[Any]) -> None:
        self._inflight.append((fut, self._last))

    def _prune(self) -> None:
        """Records of committed jobs leave ``_unwritten`` (for the cache, with caching)."""
        inflight, unwritten = self._inflight, self._unwritten
        while inflight and inflight[0][0].done():
            fut, upto = inflight.popleft()
            keep = self._cache is not None and fut.exception() is None
            while unwritten:
                seq = next(iter(unwritten))
                if seq > upto:
                    break
                record = unwritten.pop(seq)
                if keep:
                    assert self._cache is not None
                    self._cache.put(seq, record)

    async def flush(self) -> None:
        await self.owner.flush()
        self._prune()

    # -- reads ---------------------------------------------------------------------------

    def lookup(self, sequence: int) -> bytes | None:
        if sequence < self._first or sequence > self._last or not self._index:
            return None
        record = self._unwritten.get(sequence)
        if record is not None:
            return record
        if self._cache is not None:
            record = self._cache.get(sequence)
            if record is not None:
                return record
        try:
            return self._read(sequence)
        except StoreError as exc:
            self._log.error(f'Unable to read message {sequence} of channel "{self.channel}": {exc}')
            return None

    def _read(self, sequence: int) -> bytes | None:
        sql, cid = self.owner.sql, self.channel_id
        if self._cache is None:

            def one(cur: Cursor) -> list[tuple[int, bytes]]:
                cur.execute(sql.LOOKUP_MSG, (cid, sequence))
                row = cur.fetchone()
                return [] if row is None else [(sequence, row[0])]

            rows = self.owner.db.read(one)
        else:
            upto = min(sequence + READ_AHEAD - 1, self._last)

            def ahead(cur: Cursor) -> list[tuple[int, bytes]]:
                cur.execute(sql.READ_MSGS, (cid, sequence, upto))
                return list(cur.fetchall())

            rows = self.owner.db.read(ahead)
        found = None
        for seq, data in rows:
            record = bytes(data)
            if self._cache is not None:
                self._cache.put(seq, record)
            if seq == sequence:
                found = record
        return found

    def sequence_at_or_after(self, timestamp: int) -> int:
        if self._last == 0:
            return 0
        if not self._index:
            return self._last + 1
        position = self._index.position(timestamp)
        return self._first + position if position < len(self._index) else self._last + 1

    def close(self) -> None:
        if self._cache is not None:
            self._cache.clear()
