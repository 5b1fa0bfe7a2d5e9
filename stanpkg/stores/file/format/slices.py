"""Message slices ``msgs.N.dat`` + ``msgs.N.idx``: discovery and recovery (§6, §10.2).

Recovery trusts the index when it reads cleanly and its last entry matches the data file;
otherwise the slice is described by scanning the data file ("rebuild"). In read-only mode a
rebuilt index lives only in memory (``SliceInfo.index_usable`` is False and readers scan the
data file); with ``repair=True`` the reference's recovery writes are done (index rewritten,
zero tails cut).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.file.format.errors import (
    BadRecordHandler,
    FileStoreError,
    IndexFileError,
    IndexVerificationError,
    InvalidSliceNameError,
    MissingDataFileError,
    RecordDecodeError,
    UnexpectedEOFError,
)
from stanpkg.stores.file.format.framing import (
    FILE_MODE,
    VERSION_HEADER,
    CrcFunc,
    FileImage,
    RecordScan,
    check_version,
    map_file,
    write_all,
)
from stanpkg.stores.file.format.index import (
    MSG_RECORD_OVERHEAD,
    IndexEntry,
    encode_index_record,
    summarize_index,
)
from stanpkg.stores.file.format.tail import Tail, scan_tail, settle_tail
from stanpkg.stores.file.format.truncation import truncate_file

__all__ = [
    "RecoveredSlice",
    "SliceInfo",
    "check_data_files",
    "discover_slices",
    "recover_slice",
    "slice_paths",
]

_SLICE_DAT = re.compile(r"^msgs\.(.*)\.dat$")
_SLICE_IDX = re.compile(r"^msgs\.(.*)\.idx$")


def slice_paths(channel_dir: str, number: int) -> tuple[str, str]:
    base = os.path.join(channel_dir, f"msgs.{number}")
    return base + ".dat", base + ".idx"


def discover_slices(channel_dir: str) -> list[int]:
    """Slice numbers of every ``msgs.<N>.dat`` in the channel directory, ascending.

    Other files are ignored (``.bak`` archives, orphan ``.idx``); an N that is not a
    decimal integer is an error, as in the reference.
    """
    numbers = []
    for entry in os.scandir(channel_dir):
        match = _SLICE_DAT.match(entry.name)
        if match is None or entry.is_dir():
            continue
        text = match.group(1)
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise InvalidSliceNameError(
                f"message log has an invalid name: {entry.name}", path=entry.path
            )
        numbers.append(int(text))
    return sorted(numbers)


def check_data_files(channel_dir: str, numbers: list[int]) -> None:
    """Refuse a slice whose data file is gone while its index remains (the newest one, or
    one between others): its messages were acknowledged, and a server that started
    without them would give their sequences to new messages, then lose those at the next
    restart behind the stale index. An index older than every data file is what a slice
    removal interrupted between its two files leaves (data first): ignored.

    Raises :class:`MissingDataFileError` naming the missing file and what its index lists.
    """
    oldest = min(numbers, default=None)
    present = set(numbers)
    for entry in os.scandir(channel_dir):
        match = _SLICE_IDX.match(entry.name)
        if match is None or not re.fullmatch(r"[+-]?[0-9]+", match.group(1)):
            continue
        number = int(match.group(1))
        if number in present or (oldest is not None and number < oldest):
            continue
        dat_path, idx_path = slice_paths(channel_dir, number)
        raise MissingDataFileError(
            f'data file "{dat_path}" is missing; its index lists {_listed(idx_path)}',
            path=idx_path,
        )


def _listed(idx_path: str) -> str:
    """What an orphan index says its slice held, for the error text."""
    try:
        with open(idx_path, "rb") as f:
            summary = summarize_index(f.read(), idx_path, None)
    except (OSError, FileStoreError):
        return "an unreadable range of messages"
    if not summary.count:
        return "no message"
    return f"{summary.count} message(s), sequences {summary.first_seq}..{summary.last_seq}"


@dataclass(frozen=True, slots=True)
class SliceInfo:
    """Metadata of one slice; picklable, so a reader can be shipped to another process.

    ``first_seq``/``last_seq``/timestamps describe every message the slice holds on disk;
    ``removed`` leading ones were logically removed (limits/expiry), so the live range is
    ``first_live_seq..last_seq``.
    """

    channel: str
    number: int
    dat_path: str
    idx_path: str
    first_seq: int
    last_seq: int
    count: int
    total_bytes: int  # sum of (payload + 40) over every message of the slice
    first_timestamp: int
    last_timestamp: int
    index_usable: bool = True  # the on-disk index describes the slice (see module doc)
    contiguous: bool = True
    removed: int = 0

    @property
    def first_live_seq(self) -> int:
        return self.first_seq + self.removed

    @property
    def live_count(self) -> int:
        return self.count - self.removed


@dataclass
class RecoveredSlice:
    """Recovery result: the slice, the index image used (for limits) and log lines."""

    info: SliceInfo
    index: bytes  # version header + one 32-byte record per message
    log: list[str] = field(default_factory=list)
    truncated_at: int | None = None


def recover_slice(
    channel: str,
    channel_dir: str,
    number: int,
    *,
    crc: CrcFunc,
    do_crc: bool = True,
    truncate_bad_eof: bool = False,
    repair: bool = False,
    paths: tuple[str, str] | None = None,
    on_bad_record: BadRecordHandler | None = None,
    log: list[str] | None = None,
) -> RecoveredSlice:
    """Recover one slice per §10.2 (the data file must exist).

    ``paths`` overrides the ``(dat, idx)`` file names (archived ``.bak`` slices).
    ``on_bad_record`` makes a rebuild tolerant without writing anything: records with a bad
    CRC or payload are reported to it and skipped, a record cut short ends the data.
    ``log`` receives the log lines as they happen (so a caller still has the index
    lines that precede a fatal error); it is also the returned ``RecoveredSlice.log``.
    """
    dat_path, idx_path = paths or slice_paths(channel_dir, number)
    check_crc = crc if do_crc else None
    log = [] if log is None else log
    indexed: RecoveredSlice | None = None
    tail: Tail | None = None
    with map_file(dat_path) as dat:
        check_version(dat, dat_path)
        if os.path.exists(idx_path):
            with open(idx_path, "rb") as f:
                idx = f.read()
            check_version(idx, idx_path)
            try:
                summary = summarize_index(idx, idx_path, check_crc)
                if repair and summary.zero_tail_at is not None:
                    truncate_file(idx_path, summary.zero_tail_at)
                if summary.last is not None:
                    _verify_last(dat, dat_path, summary.last, crc)
                    tail = scan_tail(
                        dat,
                        dat_path,
                        summary.last,
                        check_crc=check_crc,
                        crc=crc,
                        on_bad_record=on_bad_record,
                    )
                    info = SliceInfo(
                        channel=channel,
                        number=number,
                        dat_path=dat_path,
                        idx_path=idx_path,
                        first_seq=summary.first_seq,
                        last_seq=summary.last_seq,
                        count=summary.count,
                        total_bytes=summary.total_bytes,
                        first_timestamp=summary.first_timestamp,
                        last_timestamp=summary.last_timestamp,
                        contiguous=summary.contiguous,
                    )
                    indexed = RecoveredSlice(info, idx[: summary.end], log)
            except IndexVerificationError as exc:
                log.append(str(exc.reason))
                log.append(
                    f'Error with index file "{idx_path}": {exc.reason}. '
                    "Truncating and recovering from data file"
                )
            except IndexFileError as exc:
                log.append(
                    f'Error with index file "{idx_path}": {exc.reason}. '
                    "Truncating and recovering from data file"
                )
        if indexed is None:
            rebuilt, bad_eof, zero_tail_at = _scan_data(
                channel, number, dat, dat_path, idx_path, check_crc, crc, on_bad_record
            )
    if indexed is not None and tail is not None:
        return _extended(indexed, tail, repair=repair)
    if repair and zero_tail_at is not None:
        truncate_file(dat_path, zero_tail_at)
    truncated_at = None
    if bad_eof is not None and on_bad_record is not None and not truncate_bad_eof:
        on_bad_record(bad_eof)
    elif bad_eof is not None:
        if not truncate_bad_eof:
            raise bad_eof
        truncate_file(dat_path, bad_eof.offset or 0)
        truncated_at = bad_eof.offset
        log.extend(bad_eof.log_lines(truncated=True))
    info, index = rebuilt
    if repair:
        _write_index_file(idx_path, index)
        info = replace(info, index_usable=True)
    return RecoveredSlice(info, index, log, truncated_at)


def _extended(rs: RecoveredSlice, tail: Tail, *, repair: bool) -> RecoveredSlice:
    """The slice with the whole records after its index's last entry (see tail.py)."""
    info = rs.info
    settle_tail(info.dat_path, info.idx_path, len(rs.index), tail, repair=repair, log=rs.log)
    if not tail.count:
        return rs
    info = replace(
        info,
        last_seq=tail.last_seq,
        count=info.count + tail.count,
        total_bytes=info.total_bytes + tail.total_bytes,
        last_timestamp=tail.last_timestamp,
        contiguous=info.contiguous and tail.contiguous,
        index_usable=repair,  # readers scan the data file: the index on disk lacks them
    )
    return RecoveredSlice(info, rs.index + tail.index, rs.log)


def _verify_last(dat: FileImage, dat_path: str, last: IndexEntry, crc: CrcFunc) -> None:
    """The last index entry must match the data record (CRC always checked)."""
    try:
        scan = RecordScan(dat, dat_path, typed=False, crc=crc, start=last.offset)
        records = iter(scan)
        record = next(records, None)
    except UnexpectedEOFError:
        raise IndexVerificationError(
            "unable to read last record: unexpected EOF", dat_path=dat_path, offset=last.offset
        ) from None
    except FileStoreError as exc:
        raise IndexVerificationError(
            f"unable to read last record: {exc.reason}", dat_path=dat_path, offset=last.offset
        ) from None
    if record is None:
        raise IndexVerificationError(
            "unable to read last record: EOF", dat_path=dat_path, offset=last.offset
        )
    _, _, start, size = record
    if size != last.size:
        raise IndexVerificationError(
            f"last message size in index is {last.size}, data file is {size}",
            dat_path=dat_path,
            offset=last.offset,
        )
    msg = pb.MsgProto()
    try:
        msg.ParseFromString(dat[start : start + size])
    except DecodeError as exc:
        raise IndexVerificationError(
            f"error decoding message: {exc}", dat_path=dat_path, offset=last.offset
        ) from None
    if msg.sequence != last.seq:
        raise IndexVerificationError(
            f"last message sequence in index is {last.seq}, data file is {msg.sequence}",
            dat_path=dat_path,
            offset=last.offset,
        )


def _scan_data(
    channel: str,
    number: int,
    dat: FileImage,
    dat_path: str,
    idx_path: str,
    check_crc: CrcFunc | None,
    crc: CrcFunc,
    on_bad_record: BadRecordHandler | None = None,
) -> tuple[tuple[SliceInfo, bytes], UnexpectedEOFError | None, int | None]:
    """Describe the slice from its data file, building the index image on the way.

    A cut record is returned (not raised) so the caller can truncate after unmapping.
    """
    index = bytearray(VERSION_HEADER)
    msg = pb.MsgProto()
    count = total = 0
    first_seq = last_seq = first_ts = last_ts = 0
    contiguous = True
    bad_eof: UnexpectedEOFError | None = None
    scan = RecordScan(dat, dat_path, typed=False, crc=check_crc, on_corrupted=on_bad_record)
    try:
        for offset, _, start, size in scan:
            try:
                msg.ParseFromString(dat[start : start + size])
            except DecodeError as exc:
                error = RecordDecodeError(
                    f"invalid message record: {exc}", path=dat_path, offset=offset
                )
                if on_bad_record is None:
                    raise error from None
                on_bad_record(error)
                continue
            seq, ts = msg.sequence, msg.timestamp
            if count == 0:
                first_seq, first_ts = seq, ts
            elif seq != last_seq + 1:
                contiguous = False
            last_seq, last_ts = seq, ts
            index += encode_index_record(seq, offset, ts, size, crc)
            total += size + MSG_RECORD_OVERHEAD
            count += 1
    except UnexpectedEOFError as exc:
        bad_eof = exc
    info = SliceInfo(
        channel=channel,
        number=number,
        dat_path=dat_path,
        idx_path=idx_path,
        first_seq=first_seq,
        last_seq=last_seq,
        count=count,
        total_bytes=total,
        first_timestamp=first_ts,
        last_timestamp=last_ts,
        index_usable=False,
        contiguous=contiguous,
    )
    return (info, bytes(index)), bad_eof, scan.zero_tail_at


def _write_index_file(idx_path: str, index: bytes) -> None:
    """Replace the index file content with the rebuilt image, then fsync."""
    fd = os.open(idx_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), FILE_MODE)
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        write_all(fd, index)
        os.fsync(fd)
    finally:
        os.close(fd)
