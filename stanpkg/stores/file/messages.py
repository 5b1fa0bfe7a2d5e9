"""A channel's message log on disk: ``msgs.N.dat`` + ``msgs.N.idx`` slices (filestore.md
§6–§9).

``store`` frames a whole publish batch in one pass and hands it to the OS before
returning (so every later read, including the limits' walk over old index records, sees
it); ``flush`` only adds the fsync, in a worker thread. Messages just stored are also kept
in a small in-memory run, because deliveries read them right away.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from stanpkg.plan.limits import Limits
from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores.base import (
    LocatingMessages,
    MessageBatch,
    MessageStore,
    SequenceBookkeeping,
    StoredRun,
    StoreError,
)
from stanpkg.stores.file.format.channel import ChannelInfo
from stanpkg.stores.file.format.errors import FileStoreError
from stanpkg.stores.file.format.index import INDEX_RECORD, MSG_RECORD_OVERHEAD
from stanpkg.stores.file.format.msgwriter import SliceLimits, WriteMark, auto_slice_limits
from stanpkg.stores.file.handles import SliceWriteFiles
from stanpkg.stores.file.slice_reads import HeadCursor, ReadWindow, Slice, read_index
from stanpkg.stores.file.store_context import StoreContext
from stanpkg.stores.limit_policy import LimitsWarning, drops_oldest, expired, over_count_or_size
from stanpkg.stores.recent_records import RecentRecords

__all__ = ["FileMessageStore"]


@dataclass(frozen=True, slots=True)
class _UndoPoint:
    files: SliceWriteFiles
    mark: WriteMark
    slices: int
    fields: tuple[int, int, int, int, int, int]
    seqs: int  # length of the slice's position map, -1 without one
    first: int  # the slice's entry in FileMessageStore._firsts


# Recently stored messages kept in memory, per channel: the latest batch always (its
# deliveries follow at once), earlier ones while under these caps, none once the channel
# has been idle for CACHE_IDLE_SECONDS (the reference's cache has a 1 s TTL).
CACHE_MAX_MSGS = 4096
CACHE_MAX_BYTES = 1024 * 1024
CACHE_IDLE_SECONDS = 1.0
_MAX_REPORTED_LOOKUP_ERRORS = 1000


class FileMessageStore(SequenceBookkeeping, MessageStore, LocatingMessages):
    # Declared again for mypyc, which compiles this module (stanpkg/hot_path.py).
    _first: int
    _last: int
    _last_ts: int

    def __init__(
        self,
        env: StoreContext,
        name: str,
        channel_dir: str,
        limits: Limits,
        recovered: ChannelInfo | None = None,
    ) -> None:
        self.env = env
        self.name = name
        self.channel_dir = channel_dir
        self.limits = limits
        self._slice_limits: SliceLimits = auto_slice_limits(env.config.slice_limits, limits)
        self._slices: list[Slice] = []
        self._next_number = 1
        self._first = self._last = self._count = self._bytes = 0
        if recovered is not None:
            self._slices = [
                Slice.recovered(sl, recovered.seqs(i)) for i, sl in enumerate(recovered.slices)
            ]
            self._next_number = recovered.next_number
            self._first, self._last = recovered.first_seq, recovered.last_seq
            self._count, self._bytes = recovered.msg_count, recovered.total_bytes
        self._firsts: list[int] = [s.first_seq for s in self._slices]
        self._writer: SliceWriteFiles | None = None
        if self._slices:
            self._writer = self._write_files(self._slices[-1].number)
        self._retired: list[SliceWriteFiles] = []  # rolled-over writers not yet synced
        self._last_ts = self._slices[-1].last_ts if self._slices else 0
        self._limits_warning = LimitsWarning(env.log, name)
        self._cache = RecentRecords(CACHE_MAX_MSGS, CACHE_MAX_BYTES, CACHE_IDLE_SECONDS)
        self._window = ReadWindow(env.config.read_buffer_size)
        self._head = HeadCursor()
        self._lookup_errors: set[int] = set()
        self._failed = ""  # set after a failed write: the channel takes no more messages

    # -- state ------------------------------------------------------------------------

    def state(self) -> tuple[int, int]:
        return self._count, self._bytes

    @property
    def slices(self) -> tuple[Slice, ...]:
        return tuple(self._slices)

    # -- writing ----------------------------------------------------------------------

    def _write_files(self, number: int) -> SliceWriteFiles:
        cfg = self.env.config
        return SliceWriteFiles(
            self.env.pool, self.channel_dir, number, self.env.crc, cfg.buffer_size
        )

    def store(self, batch: MessageBatch) -> StoredRun:
        first = self._last + 1
        total = len(batch.messages)
        if not total:
            return StoredRun(first, self._last)
        if self._failed:
            raise StoreError(self._failed)
        stamp = batch.timestamp
        records = MsgEncoder(self.name, stamp).encode_run(first, batch.messages)
        seq = first
        now = time.time_ns()  # the coarse clock of the age rule: one reading per batch
        added_bytes = 0
        done = 0
        undo = self._undo_point()
        try:
            while done < total:
                sl = self._slice_for_next(now)
                take = self._room(sl, records, done)
                chunk = records[done : done + take]
                assert self._writer is not None
                self._writer.writer().append_batch(seq, chunk, [stamp] * take)
                chunk_bytes = sum(map(len, chunk)) + take * MSG_RECORD_OVERHEAD
                if sl.count == 0:
                    sl.first_seq, sl.first_ts = seq, stamp
                    self._firsts[-1] = seq
                if sl.seqs is not None:  # an old slice with gaps keeps its position map
                    sl.seqs.extend(range(seq, seq + take))
                sl.count += take
                sl.last_seq = seq + take - 1
                sl.last_ts = stamp
                sl.total_bytes += chunk_bytes
                added_bytes += chunk_bytes
                seq += take
                done += take
            assert self._writer is not None
            self._writer.write_out()
        except (OSError, FileStoreError) as exc:
            failure = str(exc)  # the server's log line and the PubAck name the channel
            if not self._undo(undo):
                # Part of the batch may be on disk: refuse further writes (they would
                # reuse its sequences); recovery at the next start sorts the files out.
                self._failed = failure
            raise StoreError(failure) from exc
        self.env.syncer.mark_dirty(self._writer)
        if self._count == 0:
            self._first = self._last + 1
        self._last = seq - 1
        self._last_ts = stamp
        self._count += total
        self._bytes += added_bytes
        self._cache.remember(records, first, time.monotonic())
        self._enforce_count_and_size()
        return StoredRun(first, seq - 1)

    def _undo_point(self) -> _UndoPoint | None:
        """What :meth:`_undo` needs to take back a batch that fails to be written."""
        files = self._writer
        if files is None:
            return None
        sl = self._slices[-1]
        fields = (sl.first_seq, sl.last_seq, sl.count, sl.total_bytes, sl.first_ts, sl.last_ts)
        seqs = len(sl.seqs) if sl.seqs is not None else -1
        mark = files.writer().mark()
        return _UndoPoint(files, mark, len(self._slices), fields, seqs, self._firsts[-1])

    def _undo(self, undo: _UndoPoint | None) -> bool:
        """Take the failed batch back (files cut to where they ended, the slice's
        counters restored) so writes resume once the disk has room again; False when
        that is not possible (the batch opened a new slice, or cutting failed)."""
        if undo is None or self._writer is not undo.files or len(self._slices) != undo.slices:
            return False
        try:
            undo.files.writer().rollback(undo.mark)
        except OSError:
            return False
        sl = self._slices[-1]
        sl.first_seq, sl.last_seq, sl.count, sl.total_bytes, sl.first_ts, sl.last_ts = undo.fields
        if sl.seqs is not None:
            del sl.seqs[undo.seqs :]
        self._firsts[-1] = undo.first
        return True

    def _slice_for_next(self, now: int) -> Slice:
        """The slice the next message goes to, rolling over per filestore.md §7.3."""
        if self._writer is not None:
            sl = self._slices[-1]
            if not self._slice_limits.full(sl.count, sl.total_bytes, sl.first_ts, now):
                return sl
        return self._roll()

    def _room(self, sl: Slice, stored: Sequence[bytes], start: int) -> int:
        """How many of ``stored[start:]`` go to ``sl`` before the next roll-over check
        fails (at least one: the check passed for the first)."""
        lim = self._slice_limits
        take = len(stored) - start
        if lim.max_msgs > 0:
            take = min(take, lim.max_msgs - sl.count)
        if lim.max_bytes > 0:
            size = sl.total_bytes
            end = start + take
            if size + sum(map(len, stored[start:end])) + take * MSG_RECORD_OVERHEAD > lim.max_bytes:
                i = start
                while i < end and size < lim.max_bytes:
                    size += len(stored[i]) + MSG_RECORD_OVERHEAD
                    i += 1
                take = i - start
        return max(take, 1)

    def _roll(self) -> Slice:
        previous = self._writer
        if previous is not None:
            previous.write_out()
            self._retired.append(previous)
            previous.close()  # synced later by path: see Syncer
        number = self._next_number
        self._next_number += 1
        self._writer = self._write_files(number)
        self._writer.writer()  # creates both files with their version header now
        sl = Slice(number, self._writer.dat_path, self._writer.idx_path)
        self._slices.append(sl)
        self._firsts.append(self._last + 1)  # where the next message goes; keeps bisect valid
        if len(self._slices) == 2 and self._slices[0].removed >= self._slices[0].count:
            self._drop_first_slice()  # the only previous slice was already emptied
        return sl

    def drop_cache_if_idle(self, now: float) -> None:
        """Called every second or so: an idle channel's cache goes (bounded memory with
        many channels)."""
        self._cache.drop_if_idle(now)

    # -- limits and removal -----------------------------------------------------------

    def _enforce_count_and_size(self) -> None:
        limits = self.limits
        if not over_count_or_size(limits, self._count, self._bytes):
            return
        self._limits_warning.once(limits, self._count, self._bytes)
        try:
            while drops_oldest(limits, self._count, self._bytes):
                self._remove_first()
        except (OSError, FileStoreError) as exc:
            self.env.log.error(f"Unable to remove old messages of channel {self.name!r}: {exc}")

    def _remove_first(self) -> None:
        sl = self._slices[0]
        _, _, _, size = self._head.entry(sl, self.env.pool)
        sl.removed += 1
        self._count -= 1
        self._bytes -= size + MSG_RECORD_OVERHEAD
        if sl.removed < sl.count:
            self._first = sl.seq_at(sl.removed)
        elif len(self._slices) > 1:
            self._drop_first_slice()
            head = self._slices[0]
            self._first = head.seq_at(head.removed)
        if self._count == 0:
            self._first = self._last + 1

    def _drop_first_slice(self) -> None:
        sl = self._slices.pop(0)
        self._firsts.pop(0)
        self._head.reset()
        self._window.forget(sl)
        sl.close_files()
        self.env.remover.remove(self.name, sl.dat_path, sl.idx_path)

    def expire(self, now: int) -> int:
        limits = self.limits
        if limits.max_age <= 0:
            return 0
        try:
            while self._count > 0:
                _, _, stamp, _ = self._head.entry(self._slices[0], self.env.pool)
                if not expired(limits, stamp, now):
                    return int(stamp)
                self._remove_first()
        except (OSError, FileStoreError) as exc:
            self.env.log.error(f"Unable to expire messages of channel {self.name!r}: {exc}")
        return 0

    # -- reading ----------------------------------------------------------------------

    def lookup(self, sequence: int) -> bytes | None:
        if sequence < self._first or sequence > self._last:
            return None
        cache = self._cache
        i = sequence - cache.first
        if 0 <= i < len(cache.records):
            return cache.records[i]
        sl = self._slices[bisect_right(self._firsts, sequence) - 1]
        try:
            return self._window.read(sl, sequence, self.env.pool, self.env.check_crc)
        except (OSError, FileStoreError) as exc:
            self._window.reset()
            self._report_lookup_error(sequence, exc)
            return None

    def locate(self, sequence: int) -> str:
        """Where the stored message is on disk, as error texts name it
        (``file "<msgs.N.dat>", offset N``); "" when it is not stored."""
        if sequence < self._first or sequence > self._last:
            return ""
        sl = self._slices[bisect_right(self._firsts, sequence) - 1]
        pos = sl.position(sequence)
        if pos < sl.removed:  # -1: not in the slice
            return ""
        try:
            _, offset, _, _, _ = INDEX_RECORD.unpack(read_index(sl, self.env.pool, pos, 1))
        except (OSError, FileStoreError):
            return f'file "{sl.dat_path}"'
        return f'file "{sl.dat_path}", offset {offset}'

    def _report_lookup_error(self, sequence: int, exc: Exception) -> None:
        # Once per message: a subscriber stuck on it would otherwise flood the log.
        if (
            sequence in self._lookup_errors
            or len(self._lookup_errors) > _MAX_REPORTED_LOOKUP_ERRORS
        ):
            return
        self._lookup_errors.add(sequence)
        self.env.log.error(f"Error looking up message {self.name}:{sequence} ({exc})")

    def sequence_at_or_after(self, timestamp: int) -> int:
        if self._last == 0:
            return 0
        if self._count == 0:
            return self._last + 1
        try:
            return self._search_timestamp(timestamp)
        except (OSError, FileStoreError) as exc:
            # Starting a little early beats skipping messages the subscriber asked for.
            self.env.log.error(f"Error looking up a time position in {self.name!r}: {exc}")
            return self._first

    def _search_timestamp(self, timestamp: int) -> int:
        pool = self.env.pool
        for sl in self._slices:
            if sl.last_ts < timestamp or sl.removed >= sl.count:
                continue
            lo, hi = sl.removed, sl.count - 1  # sl.last_ts >= timestamp: hi qualifies
            while lo < hi:
                mid = (lo + hi) // 2
                _, _, stamp, _, _ = INDEX_RECORD.unpack_from(read_index(sl, pool, mid, 1))
                if stamp < timestamp:
                    lo = mid + 1
                else:
                    hi = mid
            return sl.seq_at(lo)
        return self._last + 1

    # -- durability -------------------------------------------------------------------

    def _sync_targets(self) -> list[SliceWriteFiles]:
        targets = self._retired
        self._retired = []
        if self._writer is not None:
            targets.append(self._writer)
        return targets

    async def flush(self) -> None:
        if self._writer is not None:
            self._writer.write_out()
        if self.env.config.sync_on_flush:
            await self.env.syncer.sync(*self._sync_targets())
        else:
            self._retired = []

    def discard(self) -> None:
        """Close without syncing: the channel's files are about to be deleted."""
        for target in self._sync_targets():
            self.env.syncer.forget(target)
            target.close()
        self._writer = None
        for sl in self._slices:
            sl.close_files()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.write_out()
        self.env.syncer.sync_now(self._sync_targets())
        if self._writer is not None:
            self._writer.close()
        for sl in self._slices:
            sl.close_files()
        self._window.reset()
        self._head.reset()
