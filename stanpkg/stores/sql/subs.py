"""One channel's subscriptions in the SQL store.

Subscription IDs are unique across channels here (``SubsPending`` is keyed by ``subid``
alone): the owner hands out ``largest ID in the table + 1``. Deleting the subscription
holding the largest ID only marks its row deleted, so the ID is not reused after a
restart; the next creation on that channel removes the marked rows.

Pending state: with caching, sent/acked sequences are batched into JSON rows
(:mod:`.pending`) at flush time, at the latest one second after the change or after
:data:`~.pending.MAX_PER_ROW` changes. Without caching, each sent sequence is one row
(``seq`` column) and each ack deletes it: written through, one statement per change.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from stanpkg.plan.limits import Limits
from stanpkg.stores.base import TOO_MANY_SUBS, BaseSubscriptionStore, StoreError, SubRecord
from stanpkg.stores.sql.db import Op
from stanpkg.stores.sql.messages import Owner
from stanpkg.stores.sql.pending import MAX_PER_ROW, SubPending, Write
from stanpkg.stores.sql.proto_columns import sub_proto

__all__ = ["SqlSubscriptionStore", "SubIds"]


class SubIds:
    """Subscription IDs, unique in the whole store."""

    def __init__(self, largest: int = 0) -> None:
        self.largest = largest

    def next(self) -> int:
        self.largest += 1
        return self.largest


class SqlSubscriptionStore(BaseSubscriptionStore):
    def __init__(self, owner: Owner, channel_id: int, limits: Limits, ids: SubIds) -> None:
        super().__init__(limits)
        self.owner = owner
        self.channel_id = channel_id
        self.ids = ids
        self.row = 0  # largest SubsPending.row written by this channel's subscriptions
        self.marked_deleted = False
        self.pending: dict[int, SubPending] = {}  # caching mode
        self.last_sent: dict[int, int] = {}  # write-through mode
        self._ops: list[Op] = []
        self._dirty: set[int] = set()

    # -- subscription records ------------------------------------------------------------

    def create(self, record: SubRecord) -> None:
        max_subs = self.limits.max_subs
        if max_subs > 0 and len(self._live) >= max_subs:
            raise StoreError(TOO_MANY_SUBS)
        record.id = self.ids.next()
        self._max_id = record.id
        self._live.add(record.id)
        sql = self.owner.sql
        self._queue(Op(sql.CREATE_SUB, (self.channel_id, record.id, sub_proto(record))))
        if self.marked_deleted:
            self.marked_deleted = False
            self._queue(Op(sql.DELETE_SUBS_MARKED, (self.channel_id,)))

    def update(self, record: SubRecord) -> None:
        self._queue(Op(self.owner.sql.UPDATE_SUB, (sub_proto(record), self.channel_id, record.id)))

    def delete(self, sub_id: int) -> None:
        self._live.discard(sub_id)
        self.pending.pop(sub_id, None)
        self.last_sent.pop(sub_id, None)
        self._dirty.discard(sub_id)
        sql, key = self.owner.sql, (self.channel_id, sub_id)
        if sub_id == self.ids.largest:
            self.marked_deleted = True
            self._queue(Op(sql.MARK_SUB_DELETED, key))
        else:
            self._queue(Op(sql.DELETE_SUB, key))
        self._queue(Op(sql.DELETE_SUB_PENDING, (sub_id,)))

    def _queue(self, op: Op) -> None:
        self._ops.append(op)
        self.owner.dirty(self, soon=True)

    # -- pending state -------------------------------------------------------------------

    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        if sub_id not in self._live or not sequences:
            return
        if not self.owner.caching:
            sql = self.owner.sql
            rows = [(sub_id, self._next_row(), seq) for seq in sequences]
            self.last_sent[sub_id] = max(self.last_sent.get(sub_id, 0), *sequences)
            self._queue(Op(sql.ADD_PENDING_SEQ, rows, many=True))
            return
        state = self._state(sub_id)
        waiting = 0
        for seq in sequences:
            waiting = state.sent(seq)
        self._changed(sub_id, waiting)

    def record_ack(self, sub_id: int, sequence: int) -> None:
        if sub_id not in self._live:
            return
        if not self.owner.caching:
            sql = self.owner.sql
            self._queue(Op(sql.DELETE_PENDING_SEQ, (sub_id, sequence)))
            # The row carrying the highest sent sequence is gone: keep it in the column.
            if sequence >= self.last_sent.get(sub_id, 0):
                self.last_sent[sub_id] = sequence
                self._queue(Op(sql.UPDATE_SUB_LASTSENT, (sequence, self.channel_id, sub_id)))
            return
        self._changed(sub_id, self._state(sub_id).acked(sequence))

    def _state(self, sub_id: int) -> SubPending:
        state = self.pending.get(sub_id)
        if state is None:
            state = self.pending[sub_id] = SubPending(sub_id)
        return state

    def _changed(self, sub_id: int, waiting: int) -> None:
        self._dirty.add(sub_id)
        self.owner.dirty(self, soon=True)
        if waiting >= MAX_PER_ROW:
            self.owner.kick()

    def _next_row(self) -> int:
        self.row += 1
        return self.row

    # -- flush protocol ------------------------------------------------------------------

    def materialize(self) -> list[Op]:
        ops, self._ops = self._ops, []
        for sub_id in sorted(self._dirty):
            state = self.pending.get(sub_id)
            if state is not None:
                ops.extend(self._row_ops(sub_id, state.flush(self._next_row)))
        self._dirty.clear()
        return ops

    def _row_ops(self, sub_id: int, writes: list[Write]) -> list[Op]:
        sql = self.owner.sql
        ops: list[Op] = []
        for write in writes:
            match write:
                case ("del_row", row_id):
                    ops.append(Op(sql.DELETE_PENDING_ROW, (sub_id, row_id)))
                case ("del_all",):
                    ops.append(Op(sql.DELETE_SUB_PENDING, (sub_id,)))
                case ("row", row_id, last_sent, pending, acks):
                    ops.append(Op(sql.ADD_PENDING_ROW, (sub_id, row_id, last_sent, pending, acks)))
                case ("last_sent", last_sent):
                    ops.append(Op(sql.UPDATE_SUB_LASTSENT, (last_sent, self.channel_id, sub_id)))
        return ops

    def mark_recovered(self, sub_id: int) -> None:
        """Recovery left writes for this subscription (garbage rows, conversions)."""
        self._dirty.add(sub_id)
        self.owner.dirty(self)

    def convert_to_write_through(self, sub_id: int, state: SubPending) -> None:
        """Write-through mode acks by ``seq``: rewrite JSON rows as one row a sequence."""
        sql = self.owner.sql
        self._ops.append(Op(sql.DELETE_SUB_PENDING, (sub_id,)))
        rows = [(sub_id, self._next_row(), seq) for seq in state.pending()]
        if rows:
            self._ops.append(Op(sql.ADD_PENDING_SEQ, rows, many=True))
        self._ops.append(Op(sql.UPDATE_SUB_LASTSENT, (state.last_sent, self.channel_id, sub_id)))
        self.last_sent[sub_id] = state.last_sent
        self.owner.dirty(self)

    def submitted(self, fut: Future[Any]) -> None:
        return

    async def flush(self) -> None:
        await self.owner.flush()
