"""``server.dat``: version header + exactly one untyped ``spb.ServerInfo`` record (§3)."""

from __future__ import annotations

import contextlib
import os
import stat

from google.protobuf.message import DecodeError

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ServerInfo
from stanpkg.stores.file.format.errors import RecordDecodeError, ServerFileSizeError
from stanpkg.stores.file.format.framing import (
    FILE_MODE,
    RECORD_HEADER_SIZE,
    VERSION_HEADER,
    CrcFunc,
    RecordScan,
    check_version,
    crc32_func,
    encode_record,
    write_all,
)
from stanpkg.stores.file.format.rewrite import create_temp_file
from stanpkg.stores.record_protos import server_info_from_proto, server_info_to_proto

__all__ = ["SERVER_FILE", "read_server_file", "write_server_file"]

SERVER_FILE = "server.dat"


def read_server_file(path: str, *, crc: CrcFunc | None = None) -> ServerInfo | None:
    """The recorded ServerInfo, or None when the file holds no record (fresh store).

    ``crc`` None skips CRC verification (``do_crc`` false).
    """
    with open(path, "rb") as f:
        data = f.read()
    check_version(data, path)
    scan = RecordScan(data, path, typed=False, crc=crc)
    for offset, _, start, size in scan:
        expected = 4 + RECORD_HEADER_SIZE + size
        if len(data) != expected:
            raise ServerFileSizeError(
                f"incorrect file size, expected {expected} bytes, got {len(data)} bytes",
                path=path,
                offset=offset,
            )
        info = spb.ServerInfo()
        try:
            info.ParseFromString(data[start : start + size])
        except DecodeError as exc:
            raise RecordDecodeError(
                f"invalid ServerInfo: {exc}", path=path, offset=offset
            ) from None
        return server_info_from_proto(info)
    return None


def write_server_file(
    path: str, info: ServerInfo, *, crc: CrcFunc | None = None, atomic: bool = False
) -> None:
    """Go's "Init": keep the version header, truncate to 4 bytes, write the one record.

    The file is opened read-write without O_APPEND (and never fsync'ed, like the reference).
    ``atomic`` writes the same bytes to a temporary file, fsyncs it and renames it over
    ``path`` instead: a crash can then never leave a header-only file behind (the
    reference's window for losing every channel at the next start).
    """
    record = encode_record(server_info_to_proto(info).SerializeToString(), crc or crc32_func())
    if atomic:
        fd, tmp = create_temp_file(os.path.dirname(path) or ".", SERVER_FILE)
        try:
            with contextlib.suppress(FileNotFoundError):  # keep the mode the file had
                os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
            write_all(fd, record)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), FILE_MODE)
    try:
        if os.fstat(fd).st_size == 0:
            write_all(fd, VERSION_HEADER)
        else:
            check_version(os.pread(fd, 4, 0), path)
        os.ftruncate(fd, 4)
        os.lseek(fd, 4, os.SEEK_SET)
        write_all(fd, record)
    finally:
        os.close(fd)
