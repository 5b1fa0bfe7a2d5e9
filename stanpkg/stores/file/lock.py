"""The store directory lock ``<dir>/.rootdir.lck`` (filestore.md §11).

A non-blocking POSIX record lock (``fcntl.lockf``, what Go's ``F_SETLK`` takes; ``flock``
would not interact with it), held for the store's lifetime and released by the kernel if
the process dies. Record locks are per process, so a second store of this process on the
same directory would silently "succeed": a process-wide registry refuses it instead.

A store that refuses to start removes the file again if it created it (``abandon``): a
refused start leaves the directory as it found it. Removing a lock file races with a
process that opened it just before and locks it just after; so a lock only counts once
the path still names the file that was locked.
"""

from __future__ import annotations

import contextlib
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


def _open_lock_file(path: str) -> tuple[int, bool]:
    """The lock file's descriptor, and whether this call created the file."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE), True
        except FileExistsError:
            pass
        try:
            return os.open(path, os.O_RDWR), False
        except FileNotFoundError:
            continue  # removed in between: create it


def _same_file(fd: int, path: str) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    return os.path.samestat(os.fstat(fd), on_disk)


class RootDirLock:
    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, LOCK_FILE)
        self._key = os.path.realpath(self.path)
        self._fd = -1
        self._created = False  # this lock made the file (abandon removes it)
        self._root_times = (0, 0)  # the directory's atime/mtime before it did

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
            root = os.stat(os.path.dirname(self.path) or ".")
            while True:
                fd, created = _open_lock_file(self.path)
                try:
                    locked = _lock_fd(fd)
                except BaseException:
                    os.close(fd)
                    raise
                if not locked:
                    os.close(fd)
                    return False
                if _same_file(fd, self.path):
                    break
                os.close(fd)  # removed by its abandoning creator meanwhile: again
            if os.fstat(fd).st_size:
                os.ftruncate(fd, 0)  # the content is always empty
            self._fd = fd
            self._created = created
            self._root_times = (root.st_atime_ns, root.st_mtime_ns)
            _held.add(self._key)
            return True

    def abandon(self) -> None:
        """Release, removing the file if this lock created it (a refused start)."""
        if self._fd >= 0 and self._created:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still locked: no other process holds it
                # The directory's own times too: the file was never there, as far as
                # anyone looking at the store can tell.
                os.utime(os.path.dirname(self.path) or ".", ns=self._root_times)
        self.release()

    def release(self) -> None:
        if self._fd < 0:
            return
        with _held_guard:
            os.close(self._fd)  # closing drops the record lock
            self._fd = -1
            _held.discard(self._key)
