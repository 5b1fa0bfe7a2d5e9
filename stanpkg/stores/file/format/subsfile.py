"""``<channel>/subs.dat``: typed subscription records (spec/filestore.md §5)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import RecoveredSubscription, SubRecord
from stanpkg.stores.file.format.appender import RecordAppender
from stanpkg.stores.file.format.errors import InvalidRecordTypeError
from stanpkg.stores.file.format.framing import CrcFunc, crc32_func, encode_record
from stanpkg.stores.file.format.rewrite import rewrite_records
from stanpkg.stores.file.format.typed_replay import TypedFileReplay, replay_typed_records
from stanpkg.stores.record_protos import sub_from_proto, sub_to_proto

__all__ = [
    "SUBS_FILE",
    "SUB_ACK",
    "SUB_DELETE",
    "SUB_NEW",
    "SUB_SENT",
    "SUB_UPDATE",
    "SubsFileWriter",
    "SubsReplay",
    "compact_subs_file",
    "replay_subs",
]

SUBS_FILE = "subs.dat"
SUB_NEW, SUB_UPDATE, SUB_DELETE, SUB_ACK, SUB_SENT = 1, 2, 3, 4, 5


@dataclass(frozen=True, slots=True, kw_only=True)
class SubsReplay(TypedFileReplay):
    """Replayed subscriptions (by ID, file order) + the bookkeeping of §5.3.

    A record's ``last_sent`` already includes every sequence recorded as sent (type-5
    records); ``pending`` is ascending.
    """

    subs: dict[int, RecoveredSubscription]
    max_sub_id: int
    num_recs: int
    del_recs: int


def replay_subs(
    path: str, *, crc: CrcFunc | None = None, truncate_bad_eof: bool = False, repair: bool = False
) -> SubsReplay:
    """Replay the records in file order (§5.2); ``repair`` cuts a zero tail off the file
    (the reference's recovery write)."""
    states: dict[int, spb.SubState] = {}
    pending: dict[int, set[int]] = {}
    max_id = num_recs = del_recs = 0
    update = spb.SubStateUpdate()

    def apply(offset: int, rec_type: int, payload: bytes) -> None:
        nonlocal max_id, num_recs, del_recs
        if rec_type in (SUB_SENT, SUB_ACK):
            update.ParseFromString(payload)
            seqs = pending.get(update.ID)
            if seqs is None:
                return  # unknown IDs ignored (and not counted)
            if rec_type == SUB_SENT:
                seqs.add(update.seqno)
                state = states[update.ID]
                if update.seqno > state.lastSent:
                    state.lastSent = update.seqno
                num_recs += 1
            else:
                seqs.discard(update.seqno)
                del_recs += 1
        elif rec_type in (SUB_NEW, SUB_UPDATE):
            state = spb.SubState.FromString(payload)
            existed = state.ID in states
            states[state.ID] = state
            if rec_type == SUB_NEW or not existed:
                pending[state.ID] = set()  # a new record starts with no pending
            if rec_type == SUB_UPDATE and existed:
                del_recs += 1
            if rec_type == SUB_NEW or existed:
                num_recs += 1
            max_id = max(max_id, state.ID)
        elif rec_type == SUB_DELETE:
            sub_id = spb.SubStateDelete.FromString(payload).ID
            if sub_id in states:
                del states[sub_id]
                del_recs += 1 + len(pending.pop(sub_id))
            max_id = max(max_id, sub_id)
        else:
            raise InvalidRecordTypeError(
                f"unexpected record type: {rec_type}", path=path, offset=offset
            )

    replayed = replay_typed_records(
        path, apply, crc=crc, truncate_bad_eof=truncate_bad_eof, repair=repair, what="subscription"
    )
    subs = {
        sid: RecoveredSubscription(sub_from_proto(st), sorted(pending[sid]))
        for sid, st in states.items()
    }
    return SubsReplay(
        subs=subs,
        max_sub_id=max_id,
        num_recs=num_recs,
        del_recs=del_recs,
        **replayed.bookkeeping(),
    )


class SubsFileWriter(RecordAppender):
    """Appends subscription records through a buffer; call ``flush``/``sync`` when the
    server flushes (acks are not flushed on their own)."""

    def new(self, record: SubRecord) -> int:
        return self.append(sub_to_proto(record).SerializeToString(), SUB_NEW)

    def update(self, record: SubRecord) -> int:
        return self.append(sub_to_proto(record).SerializeToString(), SUB_UPDATE)

    def delete(self, sub_id: int) -> int:
        return self.append(spb.SubStateDelete(ID=sub_id).SerializeToString(), SUB_DELETE)

    def sent(self, sub_id: int, seq: int) -> int:
        return self.append(spb.SubStateUpdate(ID=sub_id, seqno=seq).SerializeToString(), SUB_SENT)

    def acked(self, sub_id: int, seq: int) -> int:
        return self.append(spb.SubStateUpdate(ID=sub_id, seqno=seq).SerializeToString(), SUB_ACK)


def compact_subs_file(
    root: str,
    channel: str,
    subs: Iterable[RecoveredSubscription],
    *,
    crc: CrcFunc | None = None,
) -> int:
    """Rewrite ``<root>/<channel>/subs.dat`` from the live subscriptions (§5.3).

    Temp file ``<root>/subs<digits>``: one type-1 record per subscription followed by one
    type-5 record per pending sequence; flushed, fsync'ed, renamed. Returns the new size.
    """
    crc = crc or crc32_func()
    out = bytearray()
    for sub in subs:
        record = sub.record
        out += encode_record(sub_to_proto(record).SerializeToString(), crc, SUB_NEW)
        for seq in sorted(sub.pending):
            update = spb.SubStateUpdate(ID=record.id, seqno=seq).SerializeToString()
            out += encode_record(update, crc, SUB_SENT)
    rewrite_records(root, "subs", os.path.join(root, channel, SUBS_FILE), out, fsync=True)
    return len(out)
