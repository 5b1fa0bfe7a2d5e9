"""Loading an SQL store's state at start-up.

Reads go through the reader connection; what recovery decides to change (channels whose
deletion was interrupted, limits lowered since the last run, pending rows that only hold
acknowledged sequences, rows of another caching mode) is queued as ordinary writes and
committed before :func:`recover` returns.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol

from stanpkg.plan.limits import Limits, StoreLimits
from stanpkg.stores.base import (
    ChannelStore,
    RecoveredChannel,
    RecoveredState,
    RecoveredSubscription,
    StoreError,
    StoreLog,
    SubRecord,
)
from stanpkg.stores.sql.db import Op
from stanpkg.stores.sql.drivers import Cursor, one_line
from stanpkg.stores.sql.messages import MessageIndex, Owner, SqlMessageStore
from stanpkg.stores.sql.pending import SubPending
from stanpkg.stores.sql.proto_columns import client_from_row, info_from_proto, sub_from_proto
from stanpkg.stores.sql.rows import decoded, pending_lists
from stanpkg.stores.sql.schema import SCHEMA_VERSION
from stanpkg.stores.sql.subs import SqlSubscriptionStore, SubIds

__all__ = ["RecoveringStore", "recover"]


class RecoveringStore(Owner, Protocol):
    """What recovery reads and sets on the store it recovers (SqlStore), beyond what its
    message stores use. A Protocol, so that this module does not import the store that
    calls it."""

    limits: StoreLimits
    log: StoreLog
    max_channel_id: int
    sub_ids: SubIds
    channels: dict[str, ChannelStore]

    def make_channel(
        self, name: str, cid: int, limits: Limits, msgs: SqlMessageStore
    ) -> ChannelStore: ...

    def purge_channel(self, cid: int) -> None: ...

    def queue(self, op: Op) -> None: ...


def _rows(store: RecoveringStore, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    def run(cur: Cursor) -> list[tuple[Any, ...]]:
        cur.execute(sql, params)
        return [tuple(row) for row in cur.fetchall()]

    return store.db.read(run)


def recover(store: RecoveringStore) -> RecoveredState | None:
    sql = store.sql
    found = _rows(store, sql.RECOVER_SERVER_INFO)
    if not found:
        return None
    cluster_id, proto, version = found[0]
    if version != SCHEMA_VERSION:
        raise StoreError(f"sql: unsupported version: {version} (supports [1..{SCHEMA_VERSION}])")
    info = decoded(
        f'table ServerInfo, row "{cluster_id}"', lambda: info_from_proto(bytes(proto or b""))
    )
    if info.cluster_id != cluster_id:
        raise StoreError(
            f'sql: id "{cluster_id}" in column does not match cluster ID in data '
            f'"{info.cluster_id}"'
        )
    clients = [
        decoded(
            f'table Clients, row "{cid}"',
            partial(client_from_row, cid, inbox or "", data),
        )
        for cid, inbox, data in _rows(store, sql.RECOVER_CLIENTS)
    ]
    store.max_channel_id = int(_rows(store, sql.MAX_CHANNEL_ID)[0][0])
    store.sub_ids.largest = int(_rows(store, sql.MAX_SUB_ID)[0][0])
    for (cid,) in _rows(store, sql.DELETED_CHANNELS):
        store.purge_channel(int(cid))
    channels = []
    for cid, name, maxseq, maxmsgs, maxbytes, maxage in _rows(store, sql.RECOVER_CHANNELS):
        limits = store.limits.for_channel(name)
        if (maxmsgs, maxbytes, maxage) != (limits.max_msgs, limits.max_bytes, limits.max_age):
            store.queue(
                Op(
                    sql.UPDATE_CHANNEL_LIMITS,
                    (limits.max_msgs, limits.max_bytes, limits.max_age, cid),
                )
            )
        msgs = _recover_messages(store, int(cid), name, limits, int(maxseq or 0))
        channel = store.make_channel(name, int(cid), limits, msgs)
        store.channels[name] = channel
        channels.append(RecoveredChannel(channel, _recover_subs(store, channel)))
    store.queue(Op(sql.DELETE_ORPHAN_PENDING))
    fut = store.kick()
    if fut is not None:
        try:
            fut.result()
        except store.db.driver.errors as exc:
            raise StoreError(f"sql: {one_line(exc)}") from None
    return RecoveredState(info=info, clients=clients, channels=channels)


def _recover_messages(
    store: RecoveringStore, cid: int, name: str, limits: Limits, maxseq: int
) -> SqlMessageStore:
    index = MessageIndex()
    bounds = [0, 0, 0, 0, 0]  # first, last, last timestamp, total bytes, holes

    def load(cur: Cursor) -> None:
        cur.execute(store.sql.RECOVER_MSG_INDEX, (cid,))
        expected = 0
        for seq, stamp, size in cur:
            seq, stamp, size = int(seq), int(stamp or 0), int(size or 0)
            if not expected:
                bounds[0] = expected = seq
            while expected < seq:  # a hole (never written by this store): looks up as None
                index.append(stamp, 0)
                bounds[4] += 1
                expected += 1
            index.append(stamp, size)
            bounds[3] += size
            bounds[1], bounds[2] = seq, stamp
            expected += 1

    store.db.read(load)
    first, last, last_ts, total, holes = bounds
    if holes:
        store.log.warn(f'Channel "{name}": {holes} missing message(s) in the SQL store')
    if not index:
        # Everything expired (or never any message): Channels.maxseq keeps the sequence.
        first, last = (maxseq + 1, maxseq) if maxseq else (0, 0)
    msgs = SqlMessageStore(
        store,
        name,
        cid,
        limits,
        store.log,
        first=first,
        last=last,
        last_timestamp=last_ts,
        index=index,
        total_bytes=total,
        maxseq=maxseq,
    )
    if msgs.enforce_limits(warn=False):
        store.dirty(msgs)
    return msgs


def _recover_subs(store: RecoveringStore, channel: ChannelStore) -> list[RecoveredSubscription]:
    subs = channel.subs
    assert isinstance(subs, SqlSubscriptionStore)
    sql, cid = store.sql, subs.channel_id
    records: dict[int, SubRecord] = {}
    for subid, last_sent, proto, deleted in _rows(store, sql.RECOVER_SUBS, (cid,)):
        if deleted:
            subs.marked_deleted = True
        elif proto:
            where = f'table Subscriptions, row subid {subid} (channel "{channel.name}")'
            record = decoded(where, partial(sub_from_proto, bytes(proto)))
            record.id = int(subid)
            record.last_sent = max(record.last_sent, int(last_sent or 0))
            records[record.id] = record
            subs.note_id(record.id, live=True)
    states: dict[int, SubPending] = {}
    json_rows: set[int] = set()
    for subid, row, seq, last_sent, pending, acks in _rows(store, sql.RECOVER_PENDING, (cid,)):
        subs.row = max(subs.row, int(row))
        owner = records.get(int(subid))
        if owner is None:
            continue
        state = states.get(owner.id)
        if state is None:
            state = states[owner.id] = SubPending(owner.id, owner.last_sent)
        if not seq:
            json_rows.add(owner.id)
        where = f"table SubsPending, row subid {subid} row {row}"
        listed = decoded(where, partial(pending_lists, pending, acks))
        state.load(int(row), int(seq or 0), int(last_sent or 0), *listed)
    recovered = []
    for sub_id, record in records.items():
        state = states.get(sub_id)
        if state is None:
            recovered.append(RecoveredSubscription(record, []))
            continue
        state.finish_load()
        record.last_sent = max(record.last_sent, state.last_sent)
        if store.caching:
            subs.pending[sub_id] = state
            if state.dirty:
                subs.mark_recovered(sub_id)
        elif sub_id in json_rows:
            subs.convert_to_write_through(sub_id, state)
        else:
            subs.last_sent[sub_id] = state.last_sent
        recovered.append(RecoveredSubscription(record, state.pending()))
    return recovered
