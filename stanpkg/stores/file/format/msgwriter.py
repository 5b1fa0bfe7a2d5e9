"""Writing message slices the way the reference does (spec/filestore.md §6.3, §7).

Data records go through a buffer; their index records are written only once the data is
handed to the OS, so on disk the index may lag the data, never the reverse.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stanpkg.plan.limits import Limits
from stanpkg.plan.options import int_default
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.crypto import PayloadCipher
from stanpkg.stores.file.format.appender import DEFAULT_BUFFER_SIZE, open_append_fd
from stanpkg.stores.file.format.framing import (
    DIR_MODE,
    RECORD_HEADER,
    CrcFunc,
    crc32_func,
    write_all,
)
from stanpkg.stores.file.format.index import INDEX_BODY, MSG_RECORD_OVERHEAD
from stanpkg.stores.file.format.slices import SliceInfo, slice_paths

__all__ = [
    "ChannelWriter",
    "MessageSliceWriter",
    "SliceLimits",
    "WriteMark",
    "auto_slice_limits",
]

_U32 = struct.Struct("<I")
_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class WriteMark:
    """Where a slice's two files ended, and its counters, before a write."""

    dat_size: int
    idx_size: int
    counters: tuple[int, int, int, int, int, int]


class MessageSliceWriter:
    """Appends messages to one ``msgs.N.dat``/``msgs.N.idx`` pair (created if missing)."""

    def __init__(
        self,
        channel_dir: str,
        number: int,
        *,
        buffer_size: int,
        crc: CrcFunc | None = None,
    ) -> None:
        self.number = number
        self.dat_path, self.idx_path = slice_paths(channel_dir, number)
        self._crc = crc or crc32_func()
        self._buffer_size = buffer_size
        self._data = bytearray()
        self._index = bytearray()
        # New data goes after whatever the data file holds (records past the index are
        # indexed again by recovery: format/tail.py).
        self._dat_fd, self._offset = open_append_fd(self.dat_path)
        try:
            self._idx_fd, _ = open_append_fd(self.idx_path)
        except BaseException:
            os.close(self._dat_fd)
            raise
        self.count = 0
        self.total_bytes = 0
        self.first_seq = self.last_seq = 0
        self.first_timestamp = self.last_timestamp = 0

    def resume(self, info: SliceInfo) -> None:
        """Continue the counters of a recovered slice (for the slice-rolling rule)."""
        self.count, self.total_bytes = info.count, info.total_bytes
        self.first_seq, self.last_seq = info.first_seq, info.last_seq
        self.first_timestamp, self.last_timestamp = info.first_timestamp, info.last_timestamp

    def append(self, seq: int, timestamp: int, record: bytes) -> int:
        """Append one serialized ``MsgProto``; returns the record's offset."""
        size = len(record)
        crc = self._crc
        offset = self._offset
        if self._data and len(self._data) + size + 8 > self._buffer_size:
            self.flush()  # never split a record across two writes
        self._data += RECORD_HEADER.pack(size, crc(record))
        self._data += record
        body = INDEX_BODY.pack(seq, offset, timestamp, size)
        self._index += body
        self._index += _U32.pack(crc(body))
        self._offset = offset + 8 + size
        if self.count == 0:
            self.first_seq, self.first_timestamp = seq, timestamp
        self.last_seq, self.last_timestamp = seq, timestamp
        self.count += 1
        self.total_bytes += size + MSG_RECORD_OVERHEAD
        if self._buffer_size <= 0:
            self.flush()
        return offset

    def append_batch(
        self, first_seq: int, records: Sequence[bytes], timestamps: Sequence[int]
    ) -> None:
        """``append`` for consecutive sequences from ``first_seq``, framed in one pass."""
        if not records:
            return
        crc, pack_header, pack_body = self._crc, RECORD_HEADER.pack, INDEX_BODY.pack
        pack_crc = _U32.pack
        data: list[bytes] = []
        index: list[bytes] = []
        offset = self._offset
        seq = first_seq
        payload_bytes = 0
        for record, timestamp in zip(records, timestamps, strict=True):
            size = len(record)
            data.append(pack_header(size, crc(record)))
            data.append(record)
            body = pack_body(seq, offset, timestamp, size)
            index.append(body)
            index.append(pack_crc(crc(body)))
            offset += 8 + size
            payload_bytes += size
            seq += 1
        if self.count == 0:
            self.first_seq, self.first_timestamp = first_seq, timestamps[0]
        self.last_seq, self.last_timestamp = seq - 1, timestamps[-1]
        self.count += len(records)
        self.total_bytes += payload_bytes + len(records) * MSG_RECORD_OVERHEAD
        chunk = b"".join(data)
        if self._data and len(self._data) + len(chunk) > self._buffer_size:
            self.flush()
        self._data += chunk
        self._index += b"".join(index)
        self._offset = offset
        if self._buffer_size <= 0 or len(self._data) > self._buffer_size:
            self.flush()

    def mark(self) -> WriteMark:
        """Where the files end now (nothing buffered), for :meth:`rollback`."""
        self.flush()
        counters = (self.count, self.total_bytes, self.first_seq, self.last_seq)
        stamps = (self.first_timestamp, self.last_timestamp)
        return WriteMark(self._offset, os.fstat(self._idx_fd).st_size, (*counters, *stamps))

    def rollback(self, mark: WriteMark) -> None:
        """Forget what was appended since ``mark`` after a failed write (a full disk):
        both files are cut back, so no half-written record stays behind and the next
        write can succeed once there is room. Shrinking a file needs no space."""
        # New buffers: the failed write's traceback may still hold a view of the old.
        self._data = bytearray()
        self._index = bytearray()
        os.ftruncate(self._dat_fd, mark.dat_size)
        os.ftruncate(self._idx_fd, mark.idx_size)
        self._offset = mark.dat_size
        self.count, self.total_bytes, self.first_seq, self.last_seq = mark.counters[:4]
        self.first_timestamp, self.last_timestamp = mark.counters[4:]

    @property
    def offset(self) -> int:
        """Offset the next record will have in the data file."""
        return self._offset

    def filenos(self) -> tuple[int, int]:
        """(data, index) descriptors, -1 once closed."""
        return self._dat_fd, self._idx_fd

    def flush(self) -> None:
        """Hand buffered data to the OS, then the index records describing it."""
        if self._data:
            write_all(self._dat_fd, self._data)
            self._data.clear()
        if self._index:
            write_all(self._idx_fd, self._index)
            self._index.clear()

    def sync(self) -> None:
        self.flush()
        os.fsync(self._dat_fd)
        os.fsync(self._idx_fd)

    def close(self) -> None:
        if self._dat_fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._dat_fd)
            os.close(self._idx_fd)
            self._dat_fd = self._idx_fd = -1


@dataclass(frozen=True, slots=True)
class SliceLimits:
    """When to start a new slice; 0 = dimension not checked (§7.1). The defaults are the
    table's, for writers made outside a store (the store passes its configured limits)."""

    max_msgs: int = int_default("file_options.slice_max_msgs")
    max_bytes: int = int_default("file_options.slice_max_bytes")
    max_age_ns: int = int_default("file_options.slice_max_age")

    @property
    def has_limits(self) -> bool:
        return self.max_msgs > 0 or self.max_bytes > 0 or self.max_age_ns > 0

    def full(self, count: int, total_bytes: int, first_timestamp: int, now: int) -> bool:
        """§7.3: a slice holding ``count`` messages of ``total_bytes``, the first stored
        at ``first_timestamp``, takes no more at ``now`` (an empty slice always does)."""
        return count > 0 and (
            (self.max_bytes > 0 and total_bytes >= self.max_bytes)
            or (self.max_msgs > 0 and count >= self.max_msgs)
            or (self.max_age_ns > 0 and now - first_timestamp >= self.max_age_ns)
        )


def auto_slice_limits(configured: SliceLimits, channel: Limits) -> SliceLimits:
    """§7.2: with all three configured limits at 0, derive them from the channel's."""
    if configured.has_limits:
        return configured
    return SliceLimits(
        max_msgs=max(channel.max_msgs // 4, 1) if channel.max_msgs > 0 else 0,
        max_bytes=max(channel.max_bytes // 4, 1) if channel.max_bytes > 0 else 0,
        max_age_ns=max(channel.max_age // 4, _SECOND) if channel.max_age > 0 else 0,
    )


class ChannelWriter:
    """Appends a channel's messages, rolling slices per §7.3, encrypting when asked.

    Limits/removal of old messages, gap filling and slice deletion are the store's job.
    """

    def __init__(
        self,
        channel_dir: str,
        channel: str,
        *,
        slice_limits: SliceLimits | None = None,
        crc: CrcFunc | None = None,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        cipher: PayloadCipher | None = None,
        last_slice: SliceInfo | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        os.makedirs(channel_dir, mode=DIR_MODE, exist_ok=True)
        self.channel_dir = channel_dir
        self.channel = channel
        self.slice_limits = slice_limits or SliceLimits()
        self._crc = crc or crc32_func()
        self._buffer_size = buffer_size
        self._cipher = cipher
        self._clock = clock
        self._current: MessageSliceWriter | None = None
        self._msg = pb.MsgProto()
        self._last_number = last_slice.number if last_slice is not None else 0
        if last_slice is not None:
            self._current = self._open(last_slice.number)
            self._current.resume(last_slice)

    def _open(self, number: int) -> MessageSliceWriter:
        return MessageSliceWriter(
            self.channel_dir, number, crc=self._crc, buffer_size=self._buffer_size
        )

    @property
    def current_slice(self) -> int:
        return self._last_number

    def _slice_for_next(self) -> MessageSliceWriter:
        cur = self._current
        lim = self.slice_limits
        now = self._clock() if lim.max_age_ns > 0 else 0
        if cur is None or lim.full(cur.count, cur.total_bytes, cur.first_timestamp, now):
            if cur is not None:
                cur.close()
            self._last_number += 1
            cur = self._current = self._open(self._last_number)
        return cur

    def append_record(self, seq: int, timestamp: int, record: bytes) -> int:
        """Append an already serialized (and, if needed, encrypted) MsgProto."""
        return self._slice_for_next().append(seq, timestamp, record)

    def append(
        self, seq: int, data: bytes, timestamp: int, *, reply: str = "", subject: str | None = None
    ) -> int:
        """Store a message as the reference does: subject = channel, redelivered false."""
        if self._cipher is not None and data:
            data = self._cipher.encrypt(data)
        msg = self._msg  # reused (every field is assigned): cheaper than building one
        msg.sequence = seq
        msg.subject = self.channel if subject is None else subject
        msg.reply = reply
        msg.data = data
        msg.timestamp = timestamp
        return self._slice_for_next().append(seq, timestamp, msg.SerializeToString())

    def flush(self) -> None:
        if self._current is not None:
            self._current.flush()

    def sync(self) -> None:
        if self._current is not None:
            self._current.sync()

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None

    def __enter__(self) -> ChannelWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
