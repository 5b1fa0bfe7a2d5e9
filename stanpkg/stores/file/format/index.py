"""``msgs.N.idx``: fixed 32-byte index records (spec/filestore.md §6.2).

Record: ``uint64 seq | uint64 offset of the record header in msgs.N.dat | int64 timestamp |
uint32 payload size | uint32 CRC-32 of the first 28 bytes``, no record header. Hand-written
for the same reason as framing.py (Go-only format).
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from stanpkg.stores.file.format.errors import IndexFileError
from stanpkg.stores.file.format.framing import Buffer, CrcFunc

__all__ = [
    "INDEX_BODY",
    "INDEX_RECORD",
    "INDEX_RECORD_SIZE",
    "MSG_RECORD_OVERHEAD",
    "IndexEntry",
    "IndexSummary",
    "encode_index_record",
    "index_position",
    "read_index_entry",
    "summarize_index",
]

INDEX_RECORD = struct.Struct("<QQqII")
INDEX_BODY = struct.Struct("<QQqI")
INDEX_RECORD_SIZE = INDEX_RECORD.size  # 32
_CRC_COVERED = INDEX_BODY.size  # 28
_CRC = struct.Struct("<I")
# Column extractors over a run of index records (see summarize_index).
_SEQ_COLUMN = struct.Struct("<Q24x")
_SIZE_COLUMN = struct.Struct("<24xI4x")
_CRC_COLUMN = struct.Struct("<28xI")
_BODY_COLUMN = struct.Struct("<28s4x")
_first = itemgetter(0)
# Accounting per message: 8-byte record header + 32-byte index record (§6.4).
MSG_RECORD_OVERHEAD = 8 + INDEX_RECORD_SIZE


class IndexEntry(NamedTuple):
    seq: int
    offset: int
    timestamp: int
    size: int


def index_position(i: int) -> int:
    """File offset of the i-th (0-based) index record."""
    return 4 + i * INDEX_RECORD_SIZE


def encode_index_record(seq: int, offset: int, timestamp: int, size: int, crc: CrcFunc) -> bytes:
    body = INDEX_BODY.pack(seq, offset, timestamp, size)
    return body + _CRC.pack(crc(body))


def read_index_entry(buf: Buffer, pos: int, path: str, crc: CrcFunc | None) -> IndexEntry:
    """Decode (and CRC-check) the index record at file offset ``pos``."""
    if pos + INDEX_RECORD_SIZE > len(buf):
        raise IndexFileError("index record past end of index file", path=path, offset=pos)
    seq, offset, timestamp, size, stored = INDEX_RECORD.unpack_from(buf, pos)
    if crc is not None:
        actual = crc(buf[pos : pos + _CRC_COVERED])
        if actual != stored:
            raise IndexFileError(
                f"corrupted data, expected crc to be 0x{stored:08x}, got 0x{actual:08x}",
                path=path,
                offset=pos,
            )
    return IndexEntry(seq, offset, timestamp, size)


@dataclass(frozen=True, slots=True)
class IndexSummary:
    """What a slice's index says: ``count`` records, ending at ``end`` (file offset)."""

    count: int
    end: int
    first_seq: int
    last_seq: int
    first_timestamp: int
    last_timestamp: int
    total_bytes: int  # sum of (size + 40)
    contiguous: bool  # sequences first..last without gaps (index position = seq - first)
    last: IndexEntry | None
    zero_tail_at: int | None


def summarize_index(buf: Buffer, path: str, crc: CrcFunc | None) -> IndexSummary:
    """Read every index record after the version header.

    Stops at an all-zero record (zero tail). A partial trailing record or a CRC mismatch
    raises ``IndexFileError`` (the reference then rebuilds the index from the data file).
    Fields are extracted column-wise (``_columns``) so the per-record loops run in C (a
    1M-record index is summarized in well under a second, mostly its CRCs).
    """
    n, rest = divmod(len(buf) - 4, INDEX_RECORD_SIZE)
    view = memoryview(buf)[4 : 4 + n * INDEX_RECORD_SIZE]
    try:
        seqs, sizes, stored = _columns(view)
        zero_tail_at = _zero_tail(view, seqs)
        if zero_tail_at is not None:
            n = (zero_tail_at - 4) // INDEX_RECORD_SIZE
            del seqs[n:], sizes[n:], stored[n:]
            view = view[: n * INDEX_RECORD_SIZE]
        elif rest:
            raise IndexFileError("unexpected EOF", path=path, offset=4 + n * INDEX_RECORD_SIZE)
        if crc is not None:
            actual = array("I", map(crc, map(_first, _BODY_COLUMN.iter_unpack(view))))
            if actual != stored:
                i = next(i for i, (a, b) in enumerate(zip(actual, stored, strict=True)) if a != b)
                raise IndexFileError(
                    f"corrupted data, expected crc to be 0x{stored[i]:08x}, got 0x{actual[i]:08x}",
                    path=path,
                    offset=index_position(i),
                )
        payload_bytes = sum(sizes)
        last = IndexEntry(*INDEX_RECORD.unpack_from(view, (n - 1) * 32)[:4]) if n else None
        first = IndexEntry(*INDEX_RECORD.unpack_from(view, 0)[:4]) if n else None
    finally:
        view.release()
    return IndexSummary(
        count=n,
        end=index_position(n),
        first_seq=first.seq if first else 0,
        last_seq=last.seq if last else 0,
        first_timestamp=first.timestamp if first else 0,
        last_timestamp=last.timestamp if last else 0,
        total_bytes=payload_bytes + n * MSG_RECORD_OVERHEAD,
        contiguous=not seqs
        or (seqs[-1] - seqs[0] == n - 1 and seqs == array("Q", range(seqs[0], seqs[0] + n))),
        last=last,
        zero_tail_at=zero_tail_at,
    )


def _columns(view: memoryview) -> tuple[array[int], array[int], array[int]]:
    """(sequences, payload sizes, stored CRCs) of the 32-byte records in ``view``.

    On little-endian hosts the records are reinterpreted in place as machine words and
    the columns copied out with strided slices (no per-record Python objects).
    """
    if sys.byteorder == "little":
        with view.cast("Q") as words, view.cast("I") as halves:
            return array("Q", words[0::4]), array("I", halves[6::8]), array("I", halves[7::8])
    return (
        array("Q", map(_first, _SEQ_COLUMN.iter_unpack(view))),
        array("I", map(_first, _SIZE_COLUMN.iter_unpack(view))),
        array("I", map(_first, _CRC_COLUMN.iter_unpack(view))),
    )


def _zero_tail(view: memoryview, seqs: array[int]) -> int | None:
    """File offset of the first all-zero record (a real record never has sequence 0)."""
    if 0 not in seqs:
        return None
    empty = bytes(INDEX_RECORD_SIZE)
    for i, seq in enumerate(seqs):
        if seq == 0 and view[i * INDEX_RECORD_SIZE : (i + 1) * INDEX_RECORD_SIZE] == empty:
            return index_position(i)
    return None
