"""The SQL store: server info, clients and channels in a database (tables of the
reference's scripts, see scripts/).

Write path. Every change becomes statements that wait in memory; a flush hands
everything waiting (this store's statements, then each changed channel store's) to the
writer thread as one transaction, in call order, and awaits it. The server flushes after
each publish batch (before the PubAcks), after deliveries and after subscription changes,
so a PubAck still means "committed". Clients are written at once (they get no flush
point) and acks at the latest one second later. With ``no_caching`` every change is its
own transaction, submitted immediately (written through); flushes then just wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from stanpkg.plan.limits import Limits, StoreLimits
from stanpkg.stores.base import (
    BaseStore,
    ChannelStore,
    ClientRecord,
    LockableStore,
    RecoveredState,
    ServerInfo,
    StoreError,
    StoreLog,
)
from stanpkg.stores.sql.db import Database, Op, run_ops
from stanpkg.stores.sql.drivers import Cursor, one_line
from stanpkg.stores.sql.lock import SqlStoreLock
from stanpkg.stores.sql.messages import Part, SqlMessageStore
from stanpkg.stores.sql.proto_columns import client_proto, info_proto
from stanpkg.stores.sql.schema import SCHEMA_VERSION
from stanpkg.stores.sql.statements import Statements
from stanpkg.stores.sql.subs import SqlSubscriptionStore, SubIds

__all__ = ["SUB_FLUSH_INTERVAL", "SqlStore"]

SUB_FLUSH_INTERVAL = 1.0  # seconds between an ack and its write, at most (caching)


class SqlStore(BaseStore, LockableStore):
    type_name = "SQL"

    def __init__(
        self,
        limits: StoreLimits,
        log: StoreLog,
        db: Database,
        *,
        no_caching: bool = False,
        bulk_insert_limit: int = 0,
    ) -> None:
        super().__init__(limits, log)
        self.db = db
        self.sql = Statements(db.driver)
        self.caching = not no_caching
        self.bulk_insert_limit = bulk_insert_limit
        self.sub_ids = SubIds()
        self.max_channel_id = 0
        self.channel_ids: dict[str, int] = {}
        self._ops: list[Op] = []
        self._dirty: dict[Part, None] = {}  # ordered set
        self._timer: asyncio.TimerHandle | None = None
        self._lock: SqlStoreLock | None = None
        self._closed = False

    # -- Store ---------------------------------------------------------------------------

    def recover(self) -> RecoveredState | None:
        from stanpkg.stores.sql.recovery import recover

        return recover(self)

    def init(self, info: ServerInfo) -> None:
        sql, proto = self.sql, info_proto(info)

        def job(cur: Cursor) -> None:
            cur.execute(sql.HAS_SERVER_INFO)
            row = cur.fetchone()
            if row is not None and int(row[0]) > 0:
                cur.execute(sql.UPDATE_SERVER_INFO, (info.cluster_id, proto, SCHEMA_VERSION))
            else:
                cur.execute(sql.ADD_SERVER_INFO, (info.cluster_id, proto, SCHEMA_VERSION))

        self._run_now(job)

    def add_client(self, record: ClientRecord) -> None:
        sql = self.sql
        self._ops.append(Op(sql.DELETE_CLIENT, (record.id,)))
        self._ops.append(Op(sql.ADD_CLIENT, (record.id, record.hb_inbox, client_proto(record))))
        self.kick()

    def delete_client(self, client_id: str) -> None:
        self._ops.append(Op(self.sql.DELETE_CLIENT, (client_id,)))
        self.kick()

    def _new_channel(self, name: str, limits: Limits) -> ChannelStore:
        self.max_channel_id += 1
        cid = self.max_channel_id
        self._ops.append(
            Op(
                self.sql.ADD_CHANNEL,
                (cid, name, limits.max_msgs, limits.max_bytes, limits.max_age),
            )
        )
        if not self.caching:
            self.kick()
        msgs = SqlMessageStore(self, name, cid, limits, self.log)
        return self.make_channel(name, cid, limits, msgs)

    def make_channel(
        self, name: str, cid: int, limits: Limits, msgs: SqlMessageStore
    ) -> ChannelStore:
        self.channel_ids[name] = cid
        subs = SqlSubscriptionStore(self, cid, limits, self.sub_ids)
        return ChannelStore(name, msgs, subs, limits)

    def _remove_channel(self, name: str) -> None:
        cid = self.channel_ids.pop(name, None)
        if cid is None:
            return
        self._dirty = {p: None for p in self._dirty if p.channel_id != cid}
        self._ops.append(Op(self.sql.MARK_CHANNEL_DELETED, (cid,)))
        self.kick()
        self.purge_channel(cid)

    def purge_channel(self, cid: int) -> None:
        """Delete what a (marked deleted) channel holds, in its own transaction."""
        sql = self.sql
        ops = [
            Op(sql.DELETE_CHANNEL_PENDING, (cid,)),
            Op(sql.DELETE_CHANNEL_SUBS, (cid,)),
            Op(sql.DELETE_CHANNEL_MSGS, (cid,)),
            Op(sql.DELETE_CHANNEL, (cid,)),
        ]
        self._watch(self.db.submit(run_ops(ops)))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._submit()
        super().close()
        if self._lock is not None:
            self._lock.release()
        self.db.close()

    # -- the write path (also used by the channel stores) --------------------------------

    def dirty(self, part: Part, *, soon: bool = False) -> None:
        self._dirty[part] = None
        if not self.caching:
            self.kick()
        elif soon:
            self._arm_timer()

    def queue(self, op: Op) -> None:
        """A statement for the next transaction."""
        self._ops.append(op)

    def kick(self) -> Future[Any] | None:
        """Hand everything waiting to the writer now, without waiting for it."""
        return self._submit()

    async def flush(self) -> None:
        self._submit()
        fut = self.db.last
        if fut is None:
            return
        if not fut.done():
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(fut)
        exc = fut.exception()
        if exc is not None:
            raise StoreError(f"sql: {one_line(exc)}")

    def _submit(self) -> Future[Any] | None:
        ops, self._ops = self._ops, []
        parts = list(self._dirty)
        self._dirty.clear()
        for part in parts:
            ops.extend(part.materialize())
        if not ops:
            return None
        fut = self.db.submit(run_ops(ops))
        self._watch(fut)
        for part in parts:
            part.submitted(fut)
        return fut

    def _run_now(self, job: Callable[[Cursor], None]) -> None:
        """Run what waits, then ``job``, and wait for both (start-up only)."""
        self._submit()
        self.db.run(job)

    def _arm_timer(self) -> None:
        if self._timer is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (direct use): the next flush writes it
        self._timer = loop.call_later(SUB_FLUSH_INTERVAL, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._submit()

    def _watch(self, fut: Future[Any]) -> None:
        """Log a failed write (flush also raises it; jobs nobody awaits only log)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None

        def done(f: Future[Any]) -> None:
            exc = f.exception()
            if exc is None:
                return
            text = f"Error writing to the SQL store: sql: {one_line(exc)}"
            if loop is None:
                self.log.error(text)
            else:
                with contextlib.suppress(RuntimeError):  # loop closed meanwhile
                    loop.call_soon_threadsafe(self.log.error, text)

        fut.add_done_callback(done)

    # -- fault tolerance -----------------------------------------------------------------

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None] | None = None) -> bool:
        """FT mode: own the ``StoreLock`` row (see :mod:`.lock`); released by close."""
        if self._lock is None:
            self._lock = SqlStoreLock(self.db, self.sql, self.log)
        return await self._lock.acquire(on_lost)
