"""Records a slice's data file holds after the last entry of its index (filestore.md §10.2).

The index is written after the data, so a crash between the two writes leaves whole
records past the last entry; an index that lost its last entries leaves the same
picture, with records that were acknowledged. A whole record that passes its CRC is
never destroyed: its entry is added to the index, as a rebuild from the data file would.
A record cut short (a write interrupted before it could be acknowledged) ends the data:
the store cuts it off, readers ignore it. Anything else after the index (a record that
fails its CRC, does not decode, or does not continue the sequences) stops the recovery,
named with its file and offset, and is left on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.file.format.errors import (
    BadRecordHandler,
    CorruptedRecordError,
    IndexMismatchError,
    RecordDecodeError,
    UnexpectedEOFError,
)
from stanpkg.stores.file.format.framing import (
    RECORD_HEADER_SIZE,
    CrcFunc,
    FileImage,
    RecordScan,
    write_all,
)
from stanpkg.stores.file.format.index import (
    MSG_RECORD_OVERHEAD,
    IndexEntry,
    encode_index_record,
)
from stanpkg.stores.file.format.truncation import truncate_file

__all__ = ["CUT_SHORT", "Tail", "scan_tail", "settle_tail"]

# In the log line about a record cut short (channel.truncation_lines logs it as WRN).
CUT_SHORT = "(a write interrupted before it was acknowledged)"


@dataclass(frozen=True, slots=True)
class Tail:
    """What follows the last indexed record of a data file of ``size`` bytes."""

    index: bytes  # the index records of the whole records found there
    count: int
    total_bytes: int
    first_seq: int
    last_seq: int
    last_timestamp: int
    contiguous: bool  # the sequences continue the index's without a gap
    cut_at: int | None  # offset of a record cut short, or of a zero tail
    cut_short: bool  # cut_at is a record cut short (not zeros)
    size: int


def scan_tail(
    dat: FileImage,
    dat_path: str,
    last: IndexEntry,
    *,
    check_crc: CrcFunc | None,
    crc: CrcFunc,
    on_bad_record: BadRecordHandler | None = None,
) -> Tail:
    """The records after ``last`` (the index's last entry, already verified). A damaged
    record raises, or with ``on_bad_record`` is reported to it and ends the tail."""
    start = last.offset + RECORD_HEADER_SIZE + last.size
    index = bytearray()
    msg = pb.MsgProto()
    count = total = first_seq = last_ts = 0
    previous = last.seq
    contiguous = True
    cut_at: int | None = None
    scan = RecordScan(dat, dat_path, typed=False, crc=check_crc, start=start)
    try:
        for offset, _, begin, size in scan:
            try:
                msg.ParseFromString(dat[begin : begin + size])
            except DecodeError as exc:
                raise RecordDecodeError(
                    f"invalid message record: {exc}", path=dat_path, offset=offset
                ) from None
            seq = msg.sequence
            if seq <= previous:
                raise IndexMismatchError(
                    f"record after the last index entry holds sequence {seq}, not after {previous}",
                    path=dat_path,
                    offset=offset,
                )
            contiguous = contiguous and seq == previous + 1
            first_seq = first_seq or seq
            previous, last_ts = seq, msg.timestamp
            index += encode_index_record(seq, offset, last_ts, size, crc)
            total += size + MSG_RECORD_OVERHEAD
            count += 1
    except UnexpectedEOFError as exc:
        cut_at = exc.offset
    except (CorruptedRecordError, RecordDecodeError, IndexMismatchError) as exc:
        if on_bad_record is None:
            raise
        on_bad_record(exc)
    cut_short = cut_at is not None
    if cut_at is None:
        cut_at = scan.zero_tail_at
    return Tail(
        bytes(index),
        count,
        total,
        first_seq,
        previous,
        last_ts,
        contiguous,
        cut_at,
        cut_short,
        len(dat),
    )


def settle_tail(
    dat_path: str, idx_path: str, indexed: int, tail: Tail, *, repair: bool, log: list[str]
) -> None:
    """Log what the tail held and, for the store (``repair``), write the index entries
    of its records after the ``indexed`` bytes of the index file and cut off what is not
    a record. Call once the data file is no longer mapped."""
    if tail.count:
        log.append(
            f'Error with index file "{idx_path}": the data file holds {tail.count} '
            f"message(s) after its last entry (sequences {tail.first_seq}..{tail.last_seq}). "
            "Recovering them from data file"
        )
    if tail.cut_at is not None:
        extra = tail.size - tail.cut_at
        if repair:
            truncate_file(dat_path, tail.cut_at)
        if tail.cut_short:
            log.append(
                f'File "{dat_path}" held {extra} bytes after its last complete message '
                f"{CUT_SHORT}; truncated to offset: {tail.cut_at}"
                if repair
                else f'File "{dat_path}" holds {extra} bytes after its last complete message '
                f"{CUT_SHORT}; they are ignored"
            )
    if repair and tail.count:
        fd = os.open(idx_path, os.O_RDWR | getattr(os, "O_BINARY", 0))
        try:
            os.ftruncate(fd, indexed)
            os.lseek(fd, indexed, os.SEEK_SET)
            write_all(fd, tail.index)
            os.fsync(fd)
        finally:
            os.close(fd)
