"""An SQL store read as the server would recover it, without writing a byte to it.

Recovery (:mod:`.recovery`) also repairs: it purges channels whose deletion was
interrupted, rewrites lowered limits, deletes orphan pending rows, and SQLite's connection
switches the file to WAL. A migration must leave its source untouched, so this reader
only SELECTs, inside one read-only transaction (PostgreSQL: REPEATABLE READ READ ONLY;
MySQL/MariaDB: a consistent snapshot, READ ONLY; SQLite: a ``mode=ro`` connection whose
transaction holds one snapshot, immutable when no WAL is left to replay), and applies
the same rules in memory: deleted channels and subscriptions skipped, the channels'
limits re-applied (count and size, then age), each subscription's ``SubsPending`` rows
replayed into its pending set.

An undecodable row is a :class:`StoreError` naming its table and row; given ``on_bad_row``
it is reported there and skipped instead.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from stanpkg.plan.limits import Limits, StoreLimits
from stanpkg.stores.base import (
    ClientRecord,
    RecoveredSubscription,
    ServerInfo,
    StoreError,
    SubRecord,
)
from stanpkg.stores.limit_policy import drops_oldest, expired
from stanpkg.stores.sql.drivers import Connection, Cursor, Driver, one_line, open_driver
from stanpkg.stores.sql.messages import MessageIndex
from stanpkg.stores.sql.pending import SubPending
from stanpkg.stores.sql.proto_columns import client_from_row, info_from_proto, sub_from_proto
from stanpkg.stores.sql.rows import decoded, pending_lists
from stanpkg.stores.sql.schema import SCHEMA_VERSION
from stanpkg.stores.sql.statements import Statements

__all__ = ["MessageBounds", "SnapshotChannel", "SqlSnapshot", "open_snapshot"]

READ_BATCH = 256  # sequences a message query asks for at once

# Statements that open a transaction in which nothing can be written and every SELECT
# sees the same committed state.
_READ_ONLY_BEGIN = {
    "postgres": ("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",),
    "mysql": (
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
    ),
    "sqlite": ("BEGIN",),
}

BadRow = Callable[[str], None]


class MessageBounds(NamedTuple):
    """What a channel holds once the limits removed what they would; ``first_seq >
    last_seq`` when every message was removed, both 0 when it never had one."""

    first_seq: int
    last_seq: int
    msg_count: int
    total_bytes: int


@dataclass(frozen=True)
class SnapshotChannel:
    """A channel as the server would recover it."""

    name: str
    channel_id: int
    bounds: MessageBounds
    limits: Limits
    subscriptions: tuple[RecoveredSubscription, ...]


class SqlSnapshot:
    """Records and channels read at open; messages read on demand in the same transaction
    (one connection: reads of several channels take turns)."""

    def __init__(self, driver: Driver, conn: Connection, on_bad_row: BadRow | None) -> None:
        self.driver = driver
        self.sql = Statements(driver)
        self.server_info: ServerInfo | None = None
        self.clients: tuple[ClientRecord, ...] = ()
        self.channels: dict[str, SnapshotChannel] = {}
        self._conn: Connection | None = conn
        self._lock = threading.Lock()
        self._on_bad_row = on_bad_row

    def messages(self, channel: str, from_seq: int = 0) -> Iterator[tuple[int, bytes]]:
        """``(sequence, stored MsgProto)`` of the channel's messages from ``from_seq`` on,
        in sequence order (a sequence without a row is missing from the output)."""
        info = self.channels[channel]
        seq, last = max(from_seq, info.bounds.first_seq), info.bounds.last_seq
        while seq <= last:
            upto = min(seq + READ_BATCH - 1, last)
            rows = self._select(self.sql.READ_MSGS, (info.channel_id, seq, upto))
            for found, data in rows:
                yield int(found), bytes(data)
            seq = upto + 1

    def bad_row(self, error: StoreError) -> None:
        """Report ``error`` (an undecodable row) or raise it."""
        if self._on_bad_row is None:
            raise error
        self._on_bad_row(str(error))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.cursor().execute("ROLLBACK")  # nothing was written: end the snapshot
        except self.driver.errors:
            pass
        finally:
            conn.close()

    def _select(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._conn is None:
                raise StoreError("sql: the snapshot is closed")
            cur: Cursor = self._conn.cursor()
            try:
                cur.execute(sql, params)
                return [tuple(row) for row in cur.fetchall()]
            except self.driver.errors as exc:
                raise StoreError(f"sql: {one_line(exc)}") from None

    def _decoded_or_skipped(self, row: str, decode: Callable[[], Any]) -> Any:
        try:
            return decoded(row, decode)
        except StoreError as exc:
            self.bad_row(exc)
            return None


def open_snapshot(
    driver_name: str,
    source: str,
    limits: StoreLimits,
    *,
    wants_channel: Callable[[str], bool] = lambda _: True,
    on_bad_row: BadRow | None = None,
    now_ns: int | None = None,
) -> SqlSnapshot:
    """The store at ``source`` read-only; ``limits`` re-applied as at the server's start
    (age against ``now_ns``, default the clock)."""
    driver = open_driver(driver_name, source)
    try:
        conn = _connect_read_only(driver, source)
        cur = conn.cursor()
        for statement in _READ_ONLY_BEGIN[driver.name]:
            cur.execute(statement)
    except driver.errors as exc:
        raise StoreError(f"sql: {one_line(exc)}") from None
    snapshot = SqlSnapshot(driver, conn, on_bad_row)
    try:
        _load(snapshot, limits, wants_channel, time.time_ns() if now_ns is None else now_ns)
    except BaseException:
        snapshot.close()
        raise
    return snapshot


def _connect_read_only(driver: Driver, source: str) -> Connection:
    if driver.name != "sqlite":
        return driver.connect()  # autocommit; the transaction is begun read-only
    if driver.single_connection:
        raise StoreError("sql: an in-memory SQLite database has nothing to read")
    # Not the store's connect: it switches the file to WAL (a write). mode=ro never
    # writes the database, but with WAL it leaves -wal and -shm files behind; a file
    # without a WAL to replay (the server stopped cleanly) is read as immutable: no side
    # file, no lock (the server must be stopped, as for any migration).
    if source.startswith("file:"):
        uri = source + ("&" if "?" in source else "?") + "mode=ro"
    else:
        wal = source + "-wal"
        settled = not os.path.exists(wal) or os.path.getsize(wal) == 0
        uri = f"file:{urllib.parse.quote(source)}?mode=ro" + ("&immutable=1" if settled else "")
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)


def _load(
    snapshot: SqlSnapshot, limits: StoreLimits, wants_channel: Callable[[str], bool], now: int
) -> None:
    sql = snapshot.sql
    found = snapshot._select(sql.RECOVER_SERVER_INFO)
    if not found:
        return  # a store no server ever started on
    cluster_id, proto, version = found[0]
    if version != SCHEMA_VERSION:
        raise StoreError(f"sql: unsupported version: {version} (supports [1..{SCHEMA_VERSION}])")
    info = snapshot._decoded_or_skipped(
        f'table ServerInfo, row "{cluster_id}"', lambda: info_from_proto(bytes(proto or b""))
    )
    if info is not None and info.cluster_id != cluster_id:
        raise StoreError(
            f'sql: id "{cluster_id}" in column does not match cluster ID in data '
            f'"{info.cluster_id}"'
        )
    snapshot.server_info = info
    clients = (
        snapshot._decoded_or_skipped(
            f'table Clients, row "{cid}"', partial(client_from_row, cid, inbox or "", data)
        )
        for cid, inbox, data in snapshot._select(sql.RECOVER_CLIENTS)
    )
    snapshot.clients = tuple(sorted((c for c in clients if c is not None), key=lambda c: c.id))
    rows = snapshot._select(sql.RECOVER_CHANNELS)
    for cid, name, maxseq, _maxmsgs, _maxbytes, _maxage in sorted(rows, key=lambda r: r[1]):
        if not wants_channel(name):
            continue
        channel_limits = limits.for_channel(name)
        bounds = _message_bounds(snapshot, int(cid), channel_limits, int(maxseq or 0), now)
        subs = _subscriptions(snapshot, int(cid), name)
        snapshot.channels[name] = SnapshotChannel(name, int(cid), bounds, channel_limits, subs)


def _message_bounds(
    snapshot: SqlSnapshot, cid: int, limits: Limits, maxseq: int, now: int
) -> MessageBounds:
    """The channel's messages once the limits removed what they would (the store's
    rule: a sequence without a row counts as a message of 0 bytes)."""
    index = MessageIndex()
    first = last = total = 0
    for seq, stamp, size in snapshot._select(snapshot.sql.RECOVER_MSG_INDEX, (cid,)):
        seq, stamp, size = int(seq), int(stamp or 0), int(size or 0)
        if not first:
            first = last = seq
        else:
            while last + 1 < seq:  # a hole, as recovery indexes it
                index.append(stamp, 0)
                last += 1
            last = seq
        index.append(stamp, size)
        total += size
    if not index:
        return MessageBounds(maxseq + 1, maxseq, 0, 0) if maxseq else MessageBounds(0, 0, 0, 0)
    while drops_oldest(limits, len(index), total):
        total -= index.pop_front()
        first += 1
    while index and expired(limits, index.first_stamp(), now):
        total -= index.pop_front()
        first += 1
    return MessageBounds(first, last, len(index), total)


def _subscriptions(
    snapshot: SqlSnapshot, cid: int, channel: str
) -> tuple[RecoveredSubscription, ...]:
    """The channel's live subscriptions (deleted ones skipped), each with the pending
    sequences its ``SubsPending`` rows leave, as recovery replays them."""
    sql = snapshot.sql
    records: dict[int, SubRecord] = {}
    for subid, last_sent, proto, deleted in snapshot._select(sql.RECOVER_SUBS, (cid,)):
        if deleted or not proto:
            continue
        where = f'table Subscriptions, row subid {subid} (channel "{channel}")'
        record = snapshot._decoded_or_skipped(where, partial(sub_from_proto, bytes(proto)))
        if record is None:
            continue
        record.id = int(subid)
        record.last_sent = max(record.last_sent, int(last_sent or 0))
        records[record.id] = record
    states: dict[int, SubPending] = {}
    for subid, row, seq, last_sent, pending, acks in snapshot._select(sql.RECOVER_PENDING, (cid,)):
        owner = records.get(int(subid))
        if owner is None:
            continue
        where = f"table SubsPending, row subid {subid} row {row}"
        listed = snapshot._decoded_or_skipped(where, partial(pending_lists, pending, acks))
        if listed is None:
            continue
        state = states.get(owner.id)
        if state is None:
            state = states[owner.id] = SubPending(owner.id, owner.last_sent)
        state.load(int(row), int(seq or 0), int(last_sent or 0), *listed)
    recovered = []
    for sub_id in sorted(records):
        record, state = records[sub_id], states.get(sub_id)
        if state is None:
            recovered.append(RecoveredSubscription(record, []))
            continue
        state.finish_load()
        record.last_sent = max(record.last_sent, state.last_sent)
        recovered.append(RecoveredSubscription(record, state.pending()))
    return tuple(recovered)
