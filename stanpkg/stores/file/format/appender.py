"""Buffered, append-only record writer with explicit flush/fsync hooks."""

from __future__ import annotations

import os

from stanpkg.plan.options import int_default
from stanpkg.stores.file.format.framing import (
    FILE_MODE,
    VERSION_HEADER,
    CrcFunc,
    check_version,
    crc32_func,
    encode_record,
    write_all,
)

__all__ = ["DEFAULT_BUFFER_SIZE", "RecordAppender", "open_append_fd"]

# For writers made outside a store (tools, tests); the store passes its configured size.
DEFAULT_BUFFER_SIZE = int_default("file_options.buffer_size")

_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)


def open_append_fd(path: str, *, truncate_at: int | None = None) -> tuple[int, int]:
    """Open ``path`` for appending; create it with the version header if missing.

    An existing file's version is checked. ``truncate_at`` cuts the file first (used to
    drop a zero tail found at recovery). Returns ``(fd, end offset)``.
    """
    if os.path.exists(path):
        with open(path, "rb") as f:
            check_version(f.read(4), path)
    else:
        _create_with_header(path)
        truncate_at = None
    fd = os.open(path, _APPEND_FLAGS, FILE_MODE)
    try:
        if truncate_at is not None:
            os.ftruncate(fd, truncate_at)
        end = os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise
    return fd, end


def _create_with_header(path: str) -> None:
    """Make ``path`` appear whole, version header included: written under a hidden
    temporary name, then renamed. Created in place, a kill between the create and the
    header's write left a zero-length file, which recovery must refuse (an existing file
    without its version is damage, as for the reference); a SIGKILL test hit that on a
    new message slice. A leftover ``.<name>.new`` is ignored, and replaced next time."""
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".{name}.new")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    fd = os.open(temporary, flags, FILE_MODE)
    try:
        write_all(fd, VERSION_HEADER)
    finally:
        os.close(fd)
    os.replace(temporary, path)


class RecordAppender:
    """Appends framed records to one file through an in-memory buffer.

    ``buffer_size`` 0 writes each record straight to the file (clients.dat does that).
    Records reach the OS on ``flush()`` (or when the buffer fills); ``sync()`` flushes and
    fsyncs. ``size`` counts record bytes (header excluded) including buffered ones.
    """

    def __init__(
        self,
        path: str,
        *,
        crc: CrcFunc | None = None,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        truncate_at: int | None = None,
    ) -> None:
        self.path = path
        self._crc = crc or crc32_func()
        self._buffer_size = buffer_size
        self._buf = bytearray()
        self._fd, self._end = open_append_fd(path, truncate_at=truncate_at)
        self.size = self._end - 4

    @property
    def offset(self) -> int:
        """Offset the next record will have in the file."""
        return self._end

    def append(self, payload: bytes, rec_type: int = 0) -> int:
        """Frame and queue one record; returns its offset in the file."""
        record = encode_record(payload, self._crc, rec_type)
        offset = self._end
        self._end += len(record)
        self.size += len(record)
        if self._buffer_size <= 0:
            write_all(self._fd, record)
            return offset
        if self._buf and len(self._buf) + len(record) > self._buffer_size:
            self.flush()  # flush first so a record is never split across two writes
        self._buf += record
        return offset

    def append_framed(self, records: bytes) -> None:
        """Queue records already framed with ``encode_record`` (hot paths frame in bulk)."""
        self._end += len(records)
        self.size += len(records)
        if self._buffer_size <= 0:
            write_all(self._fd, records)
            return
        if self._buf and len(self._buf) + len(records) > self._buffer_size:
            self.flush()
        self._buf += records

    def fileno(self) -> int:
        """The append descriptor (-1 once closed), e.g. to fsync it from another thread."""
        return self._fd

    def flush(self) -> None:
        if self._buf:
            write_all(self._fd, self._buf)
            self._buf.clear()

    def sync(self) -> None:
        self.flush()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> RecordAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
