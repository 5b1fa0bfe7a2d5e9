"""The MEMORY store: nothing persisted, messages kept in a compact layout.

A million 128-byte messages must fit in far less memory than one Python object per
message would take, so messages live in segments: each segment is one preallocated
buffer holding encoded MsgProtos back to back, with an ``array`` of end offsets and an
``array`` of timestamps. Buffers never grow in place (no realloc copies, no heap
fragmentation from ever-larger blocks): a full segment is simply followed by a new one,
twice as large up to ``MAX_SEGMENT_BYTES``. Dropping old messages only advances the first
sequence; a segment is released once all its messages are gone.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from stanpkg.hot_path import mypyc_attr
from stanpkg.plan.limits import Limits, StoreLimits
from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores.base import (
    BaseStore,
    BaseSubscriptionStore,
    ChannelStore,
    ClientRecord,
    MessageBatch,
    MessageStore,
    RecoveredState,
    SequenceBookkeeping,
    ServerInfo,
    StoredRun,
    StoreError,
    StoreLog,
    SubRecord,
)
from stanpkg.stores.limit_policy import LimitsWarning, drops_oldest, expired, over_count_or_size

__all__ = ["MAX_SEGMENT_BYTES", "MemoryMessageStore", "MemoryStore", "MemorySubscriptionStore"]

MIN_SEGMENT_BYTES = 16 * 1024
MAX_SEGMENT_BYTES = 1024 * 1024


class _Segment:
    """Consecutive messages from sequence ``first``, stored in one fixed buffer.

    Timestamps are kept as runs (the index where each new value starts, and the value):
    the server stamps a whole publish batch with one time, so a message costs no
    timestamp bytes beyond its record (8 MB less for a million messages)."""

    __slots__ = ("buf", "ends", "first", "run_stamps", "run_starts", "used", "view")

    def __init__(self, first: int, capacity: int) -> None:
        self.first = first
        self.buf = bytearray(capacity)
        self.view = memoryview(self.buf)
        self.used = 0
        self.ends = array("I")
        self.run_starts = array("I")
        self.run_stamps = array("q")

    def get(self, index: int) -> bytes:
        start = self.ends[index - 1] if index else 0
        return bytes(self.view[start : self.ends[index]])

    def size_of(self, index: int) -> int:
        return self.ends[index] - (self.ends[index - 1] if index else 0)

    def add_stamp(self, index: int, stamp: int) -> None:
        """The timestamp of the message at ``index`` (the segment's newest)."""
        if not self.run_stamps or self.run_stamps[-1] != stamp:
            self.run_starts.append(index)
            self.run_stamps.append(stamp)

    def stamp_at(self, index: int) -> int:
        return self.run_stamps[bisect_right(self.run_starts, index) - 1]

    def first_index_stamped(self, timestamp: int, start: int) -> int | None:
        """The first index from ``start`` whose timestamp is at least ``timestamp``
        (timestamps never decrease within a channel), or None."""
        run = bisect_left(self.run_stamps, timestamp)
        if run == len(self.run_stamps):
            return None
        return max(self.run_starts[run], start)


class MemoryMessageStore(SequenceBookkeeping, MessageStore):
    # Declared again for mypyc, which compiles this module (stanpkg/hot_path.py).
    _first: int
    _last: int
    _last_ts: int

    def __init__(self, channel: str, limits: Limits, log: StoreLog) -> None:
        self.channel = channel
        self.limits = limits
        self._log = log
        self._segments: list[_Segment] = []
        self._firsts: list[int] = []  # first sequence of each segment, for bisect
        self._first = 0
        self._last = 0
        self._last_ts = 0
        self._count = 0
        self._bytes = 0
        self._limits_warning = LimitsWarning(log, channel)
        # The records of the latest batch stored, as encoded (see lookup).
        self._recent: Sequence[bytes] = ()
        self._recent_first = 0

    def state(self) -> tuple[int, int]:
        return self._count, self._bytes

    def start_after(self, sequence: int) -> None:
        """An empty store whose next message gets ``sequence + 1``: a copy of a log
        whose older messages are gone (the clustered store loading a stream)."""
        if self._count or self._last:
            raise StoreError("start_after needs an empty store")
        self._first = self._last = sequence
        if sequence:
            self._first = sequence + 1

    def _new_segment(self, first: int, size: int) -> _Segment:
        previous = len(self._segments[-1].buf) if self._segments else MIN_SEGMENT_BYTES // 2
        capacity = max(min(previous * 2, MAX_SEGMENT_BYTES), size)
        seg = _Segment(first, capacity)
        self._segments.append(seg)
        self._firsts.append(first)
        return seg

    def store(self, batch: MessageBatch) -> StoredRun:
        first = self._last + 1
        messages = batch.messages
        if not messages:
            return StoredRun(first, self._last)
        stamp = batch.timestamp
        records = MsgEncoder(self.channel, stamp).encode_run(first, messages)
        self.append_records(records, [stamp] * len(records))
        return StoredRun(first, self._last)

    def append_records(self, records: Sequence[bytes], timestamps: Sequence[int]) -> None:
        """Append MsgProtos encoded already, numbered ``last_sequence + 1 …`` (the
        clustered store's copy of its stream), then apply the count and size limits."""
        if not records:
            return
        seg = self._segments[-1] if self._segments else None
        seq = self._last
        added = 0
        for record, stamp in zip(records, timestamps, strict=True):
            seq += 1
            size = len(record)
            if seg is None or seg.used + size > len(seg.buf):
                seg = self._new_segment(seq, size)
            start = seg.used
            end = seg.used = start + size
            seg.view[start:end] = record
            seg.add_stamp(len(seg.ends), stamp)
            seg.ends.append(end)
            added += size
        if self._count == 0:
            self._first = self._last + 1
        self._last = seq
        self._last_ts = timestamps[-1]
        self._count += len(records)
        self._bytes += added
        self._recent = records
        self._recent_first = seq - len(records) + 1
        self._enforce_count_and_size()

    def _enforce_count_and_size(self) -> None:
        limits = self.limits
        if not over_count_or_size(limits, self._count, self._bytes):
            return
        self._limits_warning.once(limits, self._count, self._bytes)
        while drops_oldest(limits, self._count, self._bytes):
            self._remove_first()

    def _remove_first(self) -> None:
        seg = self._segments[0]
        index = self._first - seg.first
        self._bytes -= seg.size_of(index)
        self._count -= 1
        self._first += 1
        if self._count == 0:
            # Everything is gone: keep the sequences, release the buffers.
            self._segments.clear()
            self._firsts.clear()
        elif index + 1 >= len(seg.ends):
            del self._segments[0]
            del self._firsts[0]

    def _locate(self, sequence: int) -> tuple[_Segment, int] | None:
        if sequence < self._first or sequence > self._last or self._count == 0:
            return None
        seg = self._segments[bisect_right(self._firsts, sequence) - 1]
        return seg, sequence - seg.first

    def lookup(self, sequence: int) -> bytes | None:
        # Deliveries mostly read what was just stored: serve those without a copy.
        offset = sequence - self._recent_first
        if 0 <= offset < len(self._recent) and sequence >= self._first:
            return self._recent[offset]
        if sequence < self._first or sequence > self._last or self._count == 0:
            return None
        seg = self._segments[bisect_right(self._firsts, sequence) - 1]
        index = sequence - seg.first
        ends = seg.ends
        return bytes(seg.view[ends[index - 1] if index else 0 : ends[index]])

    def lookup_run(self, first: int, last: int) -> list[bytes | None]:
        recent_first = self._recent_first
        if (
            recent_first <= first
            and self._first <= first
            and last - recent_first < len(self._recent)
        ):
            return list(self._recent[first - recent_first : last - recent_first + 1])
        if first < self._first or last > self._last or self._count == 0:
            return super().lookup_run(first, last)
        # One bisect per segment rather than per message.
        records: list[bytes | None] = []
        seq = first
        while seq <= last:
            seg = self._segments[bisect_right(self._firsts, seq) - 1]
            index = seq - seg.first
            stop = min(last - seg.first + 1, len(seg.ends))
            view = seg.view
            start = seg.ends[index - 1] if index else 0
            for end in seg.ends[index:stop]:
                records.append(bytes(view[start:end]))
                start = end
            seq = seg.first + stop
        return records

    def timestamp(self, sequence: int) -> int:
        found = self._locate(sequence)
        if found is None:
            return 0
        seg, index = found
        return seg.stamp_at(index)

    def sequence_at_or_after(self, timestamp: int) -> int:
        if self._last == 0:
            return 0
        if self._count == 0:
            return self._last + 1
        for seg in self._segments:
            index = seg.first_index_stamped(timestamp, max(0, self._first - seg.first))
            if index is not None:
                return seg.first + index
        return self._last + 1

    def expire(self, now: int) -> int:
        limits = self.limits
        if limits.max_age <= 0:
            return 0
        while self._count:
            seg = self._segments[0]
            stamp = seg.stamp_at(self._first - seg.first)
            if not expired(limits, stamp, now):
                return stamp
            self._remove_first()
        return 0


class MemorySubscriptionStore(BaseSubscriptionStore):
    """Only IDs and the subscription limit: the server holds the state itself."""

    def update(self, record: SubRecord) -> None:
        pass

    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        pass

    def record_ack(self, sub_id: int, sequence: int) -> None:
        pass


# Compiled (stanpkg/hot_path.py), and still subclassed by interpreted code (tests).
@mypyc_attr(allow_interpreted_subclasses=True)
class MemoryStore(BaseStore):
    type_name = "MEMORY"

    def __init__(self, limits: StoreLimits, log: StoreLog) -> None:
        super().__init__(limits, log)
        self.info: ServerInfo | None = None
        self.clients: dict[str, ClientRecord] = {}

    def recover(self) -> RecoveredState | None:
        return None

    def init(self, info: ServerInfo) -> None:
        self.info = info

    def add_client(self, record: ClientRecord) -> None:
        self.clients[record.id] = record

    def delete_client(self, client_id: str) -> None:
        self.clients.pop(client_id, None)

    def _new_channel(self, name: str, limits: Limits) -> ChannelStore:
        return ChannelStore(
            name,
            MemoryMessageStore(name, limits, self.log),
            MemorySubscriptionStore(limits),
            limits,
        )
