"""The store directory lock ``<dir>/.rootdir.lck`` (filestore.md §11).

A non-blocking POSIX record lock (``fcntl.lockf``, what Go's ``F_SETLK`` takes; ``flock``
would not interact with it), held for the store's lifetime and released by the kernel if
the process dies. Record locks are per process, so a second store of this process on the
same directory would silently "succeed": a process-wide registry refuses it instead.
"""

from __future__ import annotations

import errno
import os
import threading

from stanpkg.stores.file.format.framing import FILE_MODE

__all__ = ["LOCK_FILE", "RootDirLock"]

LOCK_FILE = ".rootdir.lck"
_BUSY = {errno.EAGAIN, errno.EACCES, errno.EINTR, errno.ENOLCK}
_held: set[str] = set()
_held_guard = threading.Lock()


def _lock_fd(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows: a byte-range lock of the (empty) file
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return False
        raise
    return True


class RootDirLock:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, LOCK_FILE)
        self._key = os.path.realpath(self.path)
        self._fd = -1

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def try_acquire(self) -> bool:
        """Take the lock; False when another store (process) holds it."""
        if self._fd >= 0:
            return True
        with _held_guard:
            if self._key in _held:
                return False
            # Closing any descriptor of the file would drop our lock: never open it
            # again while held (the registry above guarantees that).
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
            try:
                locked = _lock_fd(fd)
            except BaseException:
                os.close(fd)
                raise
            if not locked:
                os.close(fd)
                return False
            os.ftruncate(fd, 0)  # the content is always empty
            self._fd = fd
            _held.add(self._key)
            return True

    def release(self) -> None:
        if self._fd < 0:
            return
        with _held_guard:
            os.close(self._fd)  # closing drops the record lock
            self._fd = -1
            _held.discard(self._key)
