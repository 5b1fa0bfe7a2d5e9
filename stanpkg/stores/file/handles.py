"""Open files under the ``file_descriptors_limit`` soft cap (filestore.md §12).

Every file the store keeps open is a :class:`ManagedFile` registered in one
:class:`HandlePool`, least recently used first. Before a file is (re)opened, idle files are
closed while the limit would be exceeded; if none can be closed the open proceeds anyway
(a soft limit). Files of old slices are also closed after a second without use. A closed
file reopens transparently on its next use, so callers only ever ask the handle for its
writer or descriptors right before using them.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from stanpkg.stores.file.format.appender import RecordAppender
from stanpkg.stores.file.format.framing import CrcFunc
from stanpkg.stores.file.format.msgwriter import MessageSliceWriter
from stanpkg.stores.file.format.slices import slice_paths
from stanpkg.stores.file.syncing import FsyncItem, dup_or_path

__all__ = [
    "AppendFile",
    "HandlePool",
    "ManagedFile",
    "SliceReadFiles",
    "SliceWriteFiles",
    "WriterFile",
]

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


class ManagedFile(ABC):
    fd_count = 1
    idle_closable = False  # closed after a while without use, limit or not

    def __init__(self, pool: HandlePool) -> None:
        self.pool = pool
        self.last_used = 0.0

    @abstractmethod
    def _open(self) -> None: ...

    @abstractmethod
    def _close(self) -> None: ...

    def close(self) -> None:
        self.pool.release(self)


class HandlePool:
    def __init__(self, limit: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self.open_fds = 0
        self._lru: OrderedDict[ManagedFile, None] = OrderedDict()

    def acquire(self, handle: ManagedFile) -> None:
        """Make sure ``handle`` is open (evicting idle files first if needed)."""
        lru = self._lru
        if handle in lru:
            # LRU order only matters under a limit; idle time only for idle-closable files.
            if self.limit > 0 or handle.idle_closable:
                handle.last_used = self.clock()
                lru.move_to_end(handle)
            return
        handle.last_used = self.clock()
        if self.limit > 0:
            self._make_room(handle.fd_count, handle)
        handle._open()
        lru[handle] = None
        self.open_fds += handle.fd_count

    def release(self, handle: ManagedFile) -> None:
        if handle in self._lru:
            del self._lru[handle]
            self.open_fds -= handle.fd_count
            handle._close()

    def _make_room(self, needed: int, keep: ManagedFile) -> None:
        while self.open_fds + needed > self.limit:
            victim = next((h for h in self._lru if h is not keep), None)
            if victim is None:
                return  # soft limit: nothing left to close, open anyway
            self.release(victim)

    def close_idle(self, idle_seconds: float) -> None:
        deadline = self.clock() - idle_seconds
        for handle in [h for h in self._lru if h.idle_closable and h.last_used <= deadline]:
            self.release(handle)

    def close_all(self) -> None:
        for handle in list(self._lru):
            self.release(handle)


class _Writer(Protocol):
    def flush(self) -> None: ...

    def close(self) -> None: ...


F = TypeVar("F", bound=_Writer)
W = TypeVar("W", bound=RecordAppender)


class WriterFile(ManagedFile, Generic[F]):
    """Files written through a writer object, recreated (``make``) on reopen."""

    def __init__(self, pool: HandlePool, make: Callable[[], F]) -> None:
        super().__init__(pool)
        self._make = make
        self._writer: F | None = None

    def writer(self) -> F:
        writer = self._writer
        if writer is not None and not self.pool.limit:
            return writer  # the hot path: open, and no limit to keep LRU order for
        self.pool.acquire(self)
        assert self._writer is not None
        return self._writer

    def write_out(self) -> None:
        """Hand buffered records to the OS (no reopen if closed: then nothing is buffered)."""
        if self._writer is not None:
            self._writer.flush()

    def _open(self) -> None:
        self._writer = self._make()

    def _close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()


class AppendFile(WriterFile[W]):
    """``clients.dat`` or a ``subs.dat``: one record appender."""

    def __init__(self, pool: HandlePool, path: str, make: Callable[[], W]) -> None:
        super().__init__(pool, make)
        self.path = path

    def append_with(self, op: Callable[[W], object]) -> int:
        """Append with ``op(writer)``; returns the bytes it added (errors propagate)."""
        writer = self.writer()
        before = writer.size
        op(writer)
        return writer.size - before

    def fsync_items(self) -> list[FsyncItem]:
        fd = self._writer.fileno() if self._writer is not None else -1
        return [dup_or_path(fd, self.path)]


class SliceWriteFiles(WriterFile[MessageSliceWriter]):
    """The append side of the write slice (data + index)."""

    fd_count = 2

    def __init__(
        self, pool: HandlePool, channel_dir: str, number: int, crc: CrcFunc, buffer_size: int
    ) -> None:
        super().__init__(
            pool, lambda: MessageSliceWriter(channel_dir, number, crc=crc, buffer_size=buffer_size)
        )
        self.number = number
        self.dat_path, self.idx_path = slice_paths(channel_dir, number)

    def fsync_items(self) -> list[FsyncItem]:
        dat_fd, idx_fd = self._writer.filenos() if self._writer is not None else (-1, -1)
        return [dup_or_path(dat_fd, self.dat_path), dup_or_path(idx_fd, self.idx_path)]


class SliceReadFiles(ManagedFile):
    """Read descriptors of one slice (data + index), for lookups and limits."""

    fd_count = 2
    idle_closable = True

    def __init__(self, pool: HandlePool, dat_path: str, idx_path: str) -> None:
        super().__init__(pool)
        self.dat_path = dat_path
        self.idx_path = idx_path
        self._dat = self._idx = -1

    def fds(self) -> tuple[int, int]:
        self.pool.acquire(self)
        return self._dat, self._idx

    def _open(self) -> None:
        dat = os.open(self.dat_path, _READ_FLAGS)
        try:
            idx = os.open(self.idx_path, _READ_FLAGS)
        except BaseException:
            os.close(dat)
            raise
        self._dat, self._idx = dat, idx

    def _close(self) -> None:
        for fd in (self._dat, self._idx):
            if fd >= 0:
                os.close(fd)
        self._dat = self._idx = -1
