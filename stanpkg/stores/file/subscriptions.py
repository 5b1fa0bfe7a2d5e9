"""A channel's ``subs.dat`` (filestore.md §5): records appended through a buffer that
reaches the OS (and disk) at the server's flush points, plus the state needed to compact
the file on its own (§5.3).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from stanpkg.plan.limits import Limits
from stanpkg.proto.encoders import encode_varint
from stanpkg.stores.base import BaseSubscriptionStore, RecoveredSubscription, StoreError, SubRecord
from stanpkg.stores.file.compaction import CompactionSchedule
from stanpkg.stores.file.format.errors import FileStoreError
from stanpkg.stores.file.format.framing import RECORD_HEADER
from stanpkg.stores.file.format.subsfile import (
    SUB_ACK,
    SUB_SENT,
    SUBS_FILE,
    SubsFileWriter,
    SubsReplay,
    compact_subs_file,
)
from stanpkg.stores.file.handles import AppendFile
from stanpkg.stores.file.store_context import StoreContext

__all__ = ["FileSubscriptionStore", "update_payload"]

_pack_header = RECORD_HEADER.pack
_SENT_HEADER = SUB_SENT << 24
_ACK_HEADER = SUB_ACK << 24


def update_payload(sub_id: int, seq: int) -> bytes:
    """``spb.SubStateUpdate{ID, seqno}`` encoded by hand (the hot path: one per message
    sent and one per ack); identical to ``SerializeToString``."""
    out = b"\x08" + encode_varint(sub_id) if sub_id else b""
    return out + b"\x10" + encode_varint(seq) if seq else out


class FileSubscriptionStore(BaseSubscriptionStore):
    def __init__(
        self,
        env: StoreContext,
        channel: str,
        channel_dir: str,
        limits: Limits,
        replay: SubsReplay | None = None,
    ) -> None:
        super().__init__(limits)
        self.env = env
        self.channel = channel
        self.path = os.path.join(channel_dir, SUBS_FILE)
        cfg = env.config
        self._file: AppendFile[SubsFileWriter] = AppendFile(
            env.pool,
            self.path,
            lambda: SubsFileWriter(self.path, crc=env.crc, buffer_size=cfg.buffer_size),
        )
        # Replay-equivalent state: what compaction rewrites (records are our copies).
        self._states: dict[int, SubRecord] = {}
        self._pending: dict[int, set[int]] = {}
        self._num_recs = self._del_recs = self._file_size = 0
        self._compaction = CompactionSchedule(env.config.compaction)
        policy = env.config.compaction
        # Below this file size no compaction is considered (a cheap test on every ack).
        self._compact_floor = policy.min_size if policy.enabled else float("inf")
        self._id_prefix: dict[int, bytes] = {}
        # Acks recorded since the last write, framed in bulk before any other record and
        # at every flush (one arrives per delivered message; one by one, framing each cost
        # a fifth of the server's time on the FILE store, bench/README.md).
        self._acks: list[tuple[int, int]] = []
        if replay is not None:
            self._load(replay)
        self._file.writer()  # creates the file with its header, as the reference does

    def _load(self, replay: SubsReplay) -> None:
        self.note_id(replay.max_sub_id, live=False)
        for sub_id, recovered in replay.subs.items():
            self._states[sub_id] = recovered.record.copy()
            self._pending[sub_id] = set(recovered.pending)
            self.note_id(sub_id, live=True)
        self._num_recs = replay.num_recs
        self._del_recs = replay.del_recs
        self._file_size = replay.records_size

    def recovered(self) -> list[RecoveredSubscription]:
        """The live subscriptions, as copies the server may keep and mutate."""
        return [RecoveredSubscription(s.record.copy(), s.pending) for s in self._snapshot()]

    def _snapshot(self) -> list[RecoveredSubscription]:
        return [
            RecoveredSubscription(record, sorted(self._pending[sub_id]))
            for sub_id, record in self._states.items()
        ]

    # -- records ----------------------------------------------------------------------

    def _write(self, op: Callable[[SubsFileWriter], int]) -> None:
        self._frame_acks()
        try:
            self._file_size += self._file.append_with(op)
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"unable to write subscription record of {self.channel!r}: {exc}"
            ) from exc
        self.env.syncer.mark_dirty(self._file)

    def _persist_new(self, record: SubRecord) -> None:
        self._write(lambda w: w.new(record))
        self._states[record.id] = record.copy()
        self._pending[record.id] = set()
        self._num_recs += 1

    def update(self, record: SubRecord) -> None:
        self._write(lambda w: w.update(record))
        if record.id in self._states:
            self._del_recs += 1
        else:
            self._pending[record.id] = set()
            self.note_id(record.id, live=True)
        self._states[record.id] = record.copy()
        self._num_recs += 1

    def _persist_delete(self, sub_id: int) -> None:
        self._write(lambda w: w.delete(sub_id))
        if self._states.pop(sub_id, None) is not None:
            self._del_recs += 1 + len(self._pending.pop(sub_id, ()))
        self._id_prefix.pop(sub_id, None)
        self._maybe_compact()

    def _prefix(self, sub_id: int) -> bytes:
        """``ID`` field of SubStateUpdate, then the ``seqno`` tag."""
        prefix = self._id_prefix.get(sub_id)
        if prefix is None:
            prefix = self._id_prefix[sub_id] = update_payload(sub_id, 0) + b"\x10"
        return prefix

    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        if not sequences:
            return
        self._frame_acks()
        crc, pack = self.env.crc, RECORD_HEADER.pack
        prefix = self._prefix(sub_id)
        parts = []
        for seq in sequences:
            payload = prefix + encode_varint(seq)
            parts.append(pack(_SENT_HEADER | len(payload), crc(payload)))
            parts.append(payload)
        self._append_framed(b"".join(parts))
        state = self._states.get(sub_id)
        if state is None:
            return
        self._pending[sub_id].update(sequences)
        highest = max(sequences)
        if highest > state.last_sent:
            state.last_sent = highest
        self._num_recs += len(sequences)

    def _append_framed(self, framed: bytes) -> None:
        """Append already framed records (the hot sent/ack path builds them by hand)."""
        try:
            self._file.writer().append_framed(framed)
        except OSError as exc:
            raise StoreError(
                f"unable to write subscription record of {self.channel!r}: {exc}"
            ) from exc
        self._file_size += len(framed)
        self.env.syncer.mark_dirty(self._file)

    def record_ack(self, sub_id: int, sequence: int) -> None:
        self._acks.append((sub_id, sequence))
        pending = self._pending.get(sub_id)
        if pending is not None:
            pending.discard(sequence)
            self._del_recs += 1

    def _frame_acks(self) -> None:
        """Append the acks recorded since the last write, in their order."""
        acks = self._acks
        if not acks:
            return
        self._acks = []
        crc, prefix_of = self.env.crc, self._prefix
        parts = []
        for sub_id, seq in acks:
            payload = prefix_of(sub_id) + encode_varint(seq)
            parts.append(_pack_header(_ACK_HEADER | len(payload), crc(payload)))
            parts.append(payload)
        self._append_framed(b"".join(parts))
        if self._file_size >= self._compact_floor:
            self._maybe_compact()

    # -- compaction (§5.3) ------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if self._compaction.due(self._file_size, self._del_recs, self._num_recs):
            self.compact()

    def compact(self) -> None:
        """Rewrite subs.dat with the live subscriptions and their pending sequences."""
        self._frame_acks()  # kept in the old file should the rewrite fail
        live = self._snapshot()
        self._file.close()  # flushes the buffer; the file is replaced below
        try:
            size = compact_subs_file(self.env.config.root, self.channel, live, crc=self.env.crc)
        except (OSError, FileStoreError) as exc:
            self.env.log.error(f"Unable to compact subscriptions file of {self.channel!r}: {exc}")
            return
        self.env.syncer.forget(self._file)  # the new file was fsync'ed by the compaction
        self._file_size = size
        self._num_recs = len(live) + sum(len(r.pending) for r in live)
        self._del_recs = 0

    # -- durability -------------------------------------------------------------------

    def write_out(self) -> None:
        """Hand buffered records to the OS (no fsync)."""
        self._frame_acks()
        self._file.write_out()

    async def flush(self) -> None:
        self._frame_acks()
        self._file.write_out()
        if self.env.config.sync_on_flush:
            await self.env.syncer.sync(self._file)

    def discard(self) -> None:
        """Close without syncing: the channel's files are about to be deleted."""
        self._acks = []
        self.env.syncer.forget(self._file)
        self._file.close()

    def close(self) -> None:
        self._frame_acks()
        self._file.write_out()
        self.env.syncer.sync_now([self._file])
        self._file.close()
