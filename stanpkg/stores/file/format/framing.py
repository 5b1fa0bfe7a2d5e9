"""Framing shared by every FILE store file: version header, record header, CRC-32.

Hand-written on purpose: this layout (4-byte version, then ``uint32 size|type<<24`` + ``uint32
CRC`` + protobuf payload, little-endian, back to back) is the Go server's own; no library
reads it. Scanning works on one buffer (bytes or a read-only mmap) with ``struct.unpack_from``
so no per-record file reads or intermediate objects are needed.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Union

from stanpkg.stores.file.format.errors import (
    CorruptedRecordError,
    FileVersionError,
    UnexpectedEOFError,
)

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "FILE_VERSION",
    "IEEE_POLY",
    "RECORD_HEADER",
    "RECORD_HEADER_SIZE",
    "VERSION_HEADER",
    "Buffer",
    "CrcFunc",
    "FileImage",
    "RecordScan",
    "check_version",
    "crc32_func",
    "encode_record",
    "map_file",
    "private_opener",
    "write_all",
]

FILE_VERSION = 1
VERSION_HEADER = FILE_VERSION.to_bytes(4, "little")
RECORD_HEADER = struct.Struct("<II")
RECORD_HEADER_SIZE = RECORD_HEADER.size
MAX_TYPED_SIZE = 0xFFFFFF
IEEE_POLY = 0xEDB88320  # reflected form, Go's crc32.IEEE

Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]  # noqa: UP007 (runtime alias)
# A whole file's content; slicing either type yields bytes (what protobuf parses).
FileImage = Union[bytes, mmap.mmap]  # noqa: UP007
CrcFunc = Callable[[Buffer], int]

# Datastore files and directories are private to the server's user: the reference's
# 0666/0777 (less the umask) let every local user read the messages.
FILE_MODE = 0o600
DIR_MODE = 0o700


def private_opener(path: str, flags: int) -> int:
    """``open(..., opener=private_opener)``: a file it creates is ``FILE_MODE``."""
    return os.open(path, flags, FILE_MODE)


class _TableCrc32:
    """Reflected table-driven CRC-32 for a non-IEEE polynomial (Go's crc32.MakeTable)."""

    __slots__ = ("poly", "table")

    def __init__(self, poly: int) -> None:
        table = []
        for i in range(256):
            crc = i
            for _ in range(8):
                crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
            table.append(crc)
        self.poly = poly
        self.table = tuple(table)

    def __call__(self, data: Buffer) -> int:
        table = self.table
        crc = 0xFFFFFFFF
        for byte in bytes(data):
            crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF


def crc32_func(poly: int = IEEE_POLY) -> CrcFunc:
    """CRC-32 with a reflected-form polynomial; IEEE is computed in C (:func:`ieee_crc32`)."""
    if not 0 < poly <= 0xFFFFFFFF:
        raise ValueError(f"invalid CRC-32 polynomial: {poly:#x}")
    if poly == IEEE_POLY:
        return ieee_crc32()
    return _TableCrc32(poly)


def ieee_crc32() -> CrcFunc:
    """ISA-L's CRC-32 (the ``crc`` extra, python-isal) where installed, else zlib's: the
    same function, ISA-L's 3-4 times faster on store records (bench/README.md); every
    message stored, sent and acknowledged in the FILE store takes about four."""
    try:
        from isal.isal_zlib import crc32
    except ImportError:
        return zlib.crc32
    return crc32


def check_version(buf: Buffer, path: str) -> None:
    """Validate the 4-byte file version (a zero-length existing file is an error)."""
    if len(buf) < 4:
        cause = "EOF" if len(buf) == 0 else "unexpected EOF"
        raise FileVersionError(f"unable to verify file version: {cause}", path=path, offset=0)
    version = int.from_bytes(buf[:4], "little")
    if version == 0 or version > FILE_VERSION:
        raise FileVersionError(
            f"unsupported file version: {version} (supports [1..{FILE_VERSION}])",
            path=path,
            offset=0,
        )


def encode_record(payload: bytes, crc: CrcFunc, rec_type: int = 0) -> bytes:
    """Header + payload of one record (typed when ``rec_type`` is non-zero)."""
    size = len(payload)
    if rec_type:
        if size > MAX_TYPED_SIZE:
            raise ValueError(f"typed record payload too big: {size} bytes")
        first = rec_type << 24 | size
    else:
        first = size
    return RECORD_HEADER.pack(first, crc(payload)) + payload


class RecordScan:
    """Iterates the records of a file image, yielding ``(offset, type, payload_start, size)``.

    Stops silently at an all-zero header (the "zero tail", ``zero_tail_at`` is set) or a
    clean EOF; raises ``UnexpectedEOFError`` for a cut header/payload and
    ``CorruptedRecordError`` for a CRC mismatch (only when ``crc`` is given). After
    iteration ``end`` is the offset just past the last good record.

    With ``on_corrupted`` a CRC mismatch is reported to it instead and the record skipped
    (its header's size is trusted to find the next one): the tolerant mode of readers that
    must go on past a damaged record (the pipeline's PERMISSIVE mode).
    """

    def __init__(
        self,
        buf: Buffer,
        path: str,
        *,
        typed: bool,
        crc: CrcFunc | None,
        start: int = 4,
        stop: int | None = None,
        on_corrupted: Callable[[CorruptedRecordError], None] | None = None,
    ) -> None:
        self.buf = buf
        self.path = path
        self.typed = typed
        self.crc = crc
        self.start = start
        self.stop = len(buf) if stop is None else stop
        self.end = start
        self.zero_tail_at: int | None = None
        self.on_corrupted = on_corrupted

    def __iter__(self) -> Iterator[tuple[int, int, int, int]]:
        buf, stop, typed, crc = self.buf, self.stop, self.typed, self.crc
        unpack = RECORD_HEADER.unpack_from
        pos = self.start
        while pos < stop:
            if pos + RECORD_HEADER_SIZE > stop:
                header = bytes(buf[pos:stop])
                raise UnexpectedEOFError(
                    path=self.path,
                    offset=pos,
                    header=header,
                    payload=None,
                    typed=typed,
                    expected=RECORD_HEADER_SIZE,
                    read=len(header),
                )
            first, rec_crc = unpack(buf, pos)
            if first == 0 and rec_crc == 0:
                self.zero_tail_at = pos
                break
            if typed:
                rec_type, size = first >> 24, first & MAX_TYPED_SIZE
            else:
                rec_type, size = 0, first
            payload_start = pos + RECORD_HEADER_SIZE
            payload_end = payload_start + size
            if payload_end > stop:
                payload = bytes(buf[payload_start:stop])
                raise UnexpectedEOFError(
                    path=self.path,
                    offset=pos,
                    header=bytes(buf[pos:payload_start]),
                    payload=payload,
                    typed=typed,
                    expected=size,
                    read=len(payload),
                )
            if crc is not None:
                actual = crc(buf[payload_start:payload_end])
                if actual != rec_crc:
                    error = CorruptedRecordError(
                        path=self.path,
                        offset=pos,
                        header=bytes(buf[pos:payload_start]),
                        payload=bytes(buf[payload_start:payload_end]),
                        typed=typed,
                        expected_crc=rec_crc,
                        actual_crc=actual,
                    )
                    if self.on_corrupted is None:
                        raise error
                    self.on_corrupted(error)
                    pos = payload_end
                    continue
            yield pos, rec_type, payload_start, size
            pos = payload_end
            self.end = pos


@contextmanager
def map_file(path: str) -> Iterator[FileImage]:
    """Read-only image of a file: an mmap (paged lazily), or ``b""`` for an empty file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield b""
            return
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mapped
        finally:
            mapped.close()


def write_all(fd: int, data: Buffer) -> None:
    """os.write until everything is written (it may write partially)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
