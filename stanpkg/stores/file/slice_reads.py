"""A channel's slices as the running store sees them, and reading messages back.

Only per-slice metadata lives in memory (no per-message state): index records are read
from ``msgs.N.idx`` when needed. Two read paths keep that cheap:

* lookups go through a read-ahead window (a run of index records plus the data bytes
  they describe, read with one ``pread`` each); the window grows while reads are
  sequential (a subscriber catching up) up to ``read_buffer_size`` and shrinks back for
  scattered reads (redeliveries);
* removal by limits walks the oldest slice's index from its head in chunks.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

from stanpkg.stores.file.format.errors import (
    IndexFileError,
    IndexMismatchError,
)
from stanpkg.stores.file.format.framing import RECORD_HEADER_SIZE, CrcFunc
from stanpkg.stores.file.format.index import INDEX_RECORD, INDEX_RECORD_SIZE, index_position
from stanpkg.stores.file.format.reader import indexed_payload
from stanpkg.stores.file.format.slices import SliceInfo
from stanpkg.stores.file.handles import HandlePool, SliceReadFiles

__all__ = ["HeadCursor", "ReadWindow", "Slice", "pread_exact"]

HEAD_CHUNK_RECORDS = 4096  # index records read at once when removing old messages
WINDOW_RECORDS = 8192  # index records per read-ahead window
MIN_READ_AHEAD = 64 * 1024


@dataclass(slots=True, eq=False)
class Slice:
    """One ``msgs.N`` pair. Positions count every record ever written to the slice;
    the first ``removed`` ones were dropped by limits (still on disk)."""

    number: int
    dat_path: str
    idx_path: str
    first_seq: int = 0
    last_seq: int = 0
    count: int = 0
    total_bytes: int = 0
    first_ts: int = 0
    last_ts: int = 0
    removed: int = 0
    # Sequences by position, only for slices with gaps (written by old servers).
    seqs: array[int] | None = None
    files: SliceReadFiles | None = field(default=None, repr=False)

    @classmethod
    def recovered(cls, info: SliceInfo, seqs: array[int] | None) -> Slice:
        """The running state of a slice as recovery described it."""
        return cls(
            number=info.number,
            dat_path=info.dat_path,
            idx_path=info.idx_path,
            first_seq=info.first_seq,
            last_seq=info.last_seq,
            count=info.count,
            total_bytes=info.total_bytes,
            first_ts=info.first_timestamp,
            last_ts=info.last_timestamp,
            removed=info.removed,
            seqs=seqs,
        )

    def position(self, seq: int) -> int:
        """Index position of ``seq`` in this slice, -1 if it holds no such sequence."""
        seqs = self.seqs
        if seqs is None:
            pos = seq - self.first_seq
            return pos if 0 <= pos < self.count else -1
        pos = bisect_left(seqs, seq)
        return pos if pos < len(seqs) and seqs[pos] == seq else -1

    def seq_at(self, pos: int) -> int:
        return self.first_seq + pos if self.seqs is None else self.seqs[pos]

    def read_files(self, pool: HandlePool) -> tuple[int, int]:
        if self.files is None:
            self.files = SliceReadFiles(pool, self.dat_path, self.idx_path)
        return self.files.fds()

    def close_files(self) -> None:
        if self.files is not None:
            self.files.close()
            self.files = None


def pread_exact(fd: int, size: int, offset: int, path: str) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise IndexFileError(
            f"expected {size} bytes at offset {offset}, file holds only {len(data)}",
            path=path,
            offset=offset,
        )
    return data


def read_index(sl: Slice, pool: HandlePool, pos: int, count: int) -> bytes:
    _, idx_fd = sl.read_files(pool)
    return pread_exact(idx_fd, count * INDEX_RECORD_SIZE, index_position(pos), sl.idx_path)


class HeadCursor:
    """Index records of the oldest slice from its first live message on."""

    __slots__ = ("_buf", "_pos", "_slice")

    def __init__(self) -> None:
        self._slice: Slice | None = None
        self._pos = 0
        self._buf = b""

    def reset(self) -> None:
        self._slice = None
        self._buf = b""

    def entry(self, sl: Slice, pool: HandlePool) -> tuple[int, int, int, int]:
        """(sequence, offset, timestamp, size) of the slice's first live message."""
        pos = sl.removed
        index = pos - self._pos
        if self._slice is not sl or not 0 <= index < len(self._buf) // INDEX_RECORD_SIZE:
            count = min(sl.count - pos, HEAD_CHUNK_RECORDS)
            self._buf = read_index(sl, pool, pos, count)
            self._slice, self._pos, index = sl, pos, 0
        seq, offset, stamp, size, _ = INDEX_RECORD.unpack_from(self._buf, index * INDEX_RECORD_SIZE)
        return seq, offset, stamp, size


class ReadWindow:
    """Read-ahead of one slice: index records from ``pos`` and a run of data bytes."""

    __slots__ = ("_ahead", "_data", "_data_at", "_index", "_max_ahead", "_pos", "_slice")

    def __init__(self, read_buffer_size: int) -> None:
        self._max_ahead = read_buffer_size
        self._ahead = min(MIN_READ_AHEAD, read_buffer_size)
        self.reset()

    def reset(self) -> None:
        self._slice: Slice | None = None
        self._pos = 0
        self._index = b""
        self._data = b""
        self._data_at = 0

    def forget(self, sl: Slice) -> None:
        if self._slice is sl:
            self.reset()

    def read(self, sl: Slice, seq: int, pool: HandlePool, crc: CrcFunc | None) -> bytes:
        """The stored payload (MsgProto bytes) of ``seq``, verified against its index."""
        pos = sl.position(seq)
        if pos < 0:
            raise IndexMismatchError(f"sequence {seq} not found in index", path=sl.idx_path)
        index = pos - self._pos
        if self._slice is not sl or not 0 <= index < len(self._index) // INDEX_RECORD_SIZE:
            count = min(sl.count - pos, WINDOW_RECORDS)
            self._index = read_index(sl, pool, pos, count)
            self._data = b""
            self._slice, self._pos, index = sl, pos, 0
        rec_seq, offset, _, size, _ = INDEX_RECORD.unpack_from(
            self._index, index * INDEX_RECORD_SIZE
        )
        if rec_seq != seq:
            raise IndexMismatchError(
                f"index holds sequence {rec_seq} where {seq} was expected",
                path=sl.idx_path,
                offset=index_position(pos),
            )
        end = offset + RECORD_HEADER_SIZE + size
        start = offset - self._data_at
        if start < 0 or end - self._data_at > len(self._data):
            self._fill(sl, pool, index, offset, end)
            start = 0
        return indexed_payload(self._data, start, offset, seq, size, crc, sl.dat_path)

    def _fill(self, sl: Slice, pool: HandlePool, index: int, offset: int, end: int) -> None:
        """Read the record at ``offset`` and, within the read-ahead budget, the records
        the window's index lists after it."""
        sequential = self._data and offset == self._data_at + len(self._data)
        if self._max_ahead > 0:
            self._ahead = min(self._ahead * 2, self._max_ahead) if sequential else MIN_READ_AHEAD
            budget = offset + max(self._ahead, 0)
            for rec_seq_off in range(index + 1, len(self._index) // INDEX_RECORD_SIZE):
                _, next_off, _, next_size, _ = INDEX_RECORD.unpack_from(
                    self._index, rec_seq_off * INDEX_RECORD_SIZE
                )
                next_end = next_off + RECORD_HEADER_SIZE + next_size
                if next_end > budget or next_off != end:
                    break
                end = next_end
        dat_fd, _ = sl.read_files(pool)
        self._data = pread_exact(dat_fd, end - offset, offset, sl.dat_path)
        self._data_at = offset
