"""Replaying a typed record file (``clients.dat``, ``subs.dat``): reading it, checking its
version, scanning its records with the bad-EOF and zero-tail repairs, and the bookkeeping
that leaves. What each record means stays with its file's module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from google.protobuf.message import DecodeError

from stanpkg.stores.file.format.errors import RecordDecodeError
from stanpkg.stores.file.format.framing import CrcFunc, RecordScan, check_version
from stanpkg.stores.file.format.truncation import truncate_file, truncate_or_raise

__all__ = ["RecordHandler", "TypedFileReplay", "replay_typed_records"]

# Applies one record: (offset, record type, payload). A DecodeError it raises is reported
# as a RecordDecodeError at that offset.
RecordHandler = Callable[[int, int, bytes], None]


@dataclass(frozen=True, slots=True)
class TypedFileReplay:
    """What a replay leaves besides the records' meaning: where appends go and what the
    repairs did."""

    records_size: int  # bytes of records (version header excluded)
    end: int  # offset after the last good record: appends go there
    zero_tail_at: int | None
    truncated_at: int | None  # set when truncate_bad_eof cut a bad record
    # The reference's log lines of that truncation (empty when nothing was cut).
    truncation_log: tuple[str, ...] = ()

    def bookkeeping(self) -> dict[str, Any]:
        """These fields by name, for building a file's own replay (a subclass) from them."""
        return {f.name: getattr(self, f.name) for f in fields(TypedFileReplay)}


def replay_typed_records(
    path: str,
    handle: RecordHandler,
    *,
    crc: CrcFunc | None,
    truncate_bad_eof: bool,
    repair: bool,
    what: str,
) -> TypedFileReplay:
    """Feed every record of the file at ``path`` to ``handle``, in file order.

    ``truncate_bad_eof`` cuts the file at a record cut short instead of raising;
    ``repair`` cuts a zero tail off the file (the reference's recovery write). ``what``
    names the records in a decode error ("invalid <what> record: ...").
    """
    with open(path, "rb") as f:
        data = f.read()
    check_version(data, path)
    scan = RecordScan(data, path, typed=True, crc=crc)
    with truncate_or_raise(path, truncate_bad_eof) as truncation:
        for offset, rec_type, start, size in scan:
            try:
                handle(offset, rec_type, data[start : start + size])
            except DecodeError as exc:
                raise RecordDecodeError(
                    f"invalid {what} record: {exc}", path=path, offset=offset
                ) from None
    if repair and scan.zero_tail_at is not None:
        truncate_file(path, scan.zero_tail_at)
    return TypedFileReplay(
        records_size=scan.end - 4,
        end=scan.end,
        zero_tail_at=scan.zero_tail_at,
        truncated_at=truncation.offset,
        truncation_log=tuple(truncation.log),
    )
