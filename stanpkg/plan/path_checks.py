"""What the plan's rules ask of the file system: can the server read this file, create and
write this directory. Each answer is a reason or "", never an exception: a path the
server's user may not even look at (a parent directory it cannot enter, as a root-owned
0700 volume is for a container's user) is a configuration error like any other, and
``pathlib`` raises on it (``Path.exists()`` lets ``PermissionError`` through)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def file_problem(value: str, *, executable: bool = False) -> str:
    """Why the file ``value`` cannot be read (or run), or ""."""
    try:
        mode = os.stat(value).st_mode
    except OSError as exc:
        return _unreachable(Path(value), exc) or "does not exist"
    except ValueError:  # a NUL character: no such path can exist
        return "does not exist"
    if not stat.S_ISREG(mode):
        return "does not exist"
    if not os.access(value, os.X_OK if executable else os.R_OK):
        return f"is not {'executable' if executable else 'readable'}"
    return ""


def directory_problem(directory: Path) -> str:
    """Why ``directory`` cannot be created or written, or "" (the nearest existing
    ancestor decides, as mkdir -p would find it)."""
    existing = directory
    while True:
        try:
            mode = existing.stat().st_mode
            break
        except (FileNotFoundError, NotADirectoryError):
            if existing.parent == existing:
                return "cannot be created"
            existing = existing.parent
        except OSError as exc:
            return _unreachable(existing, exc) or f"cannot be checked: {_reason(exc)}"
        except ValueError:
            return "is not a valid path (it contains a NUL character)"
    if not stat.S_ISDIR(mode):
        if existing == directory:
            return "is not a directory"
        return f'cannot be created: "{existing}" is not a directory'
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == directory:
            return "is not writable"
        return f'cannot be created: "{existing}" is not writable'
    return ""


def _unreachable(path: Path, exc: OSError) -> str:
    """For a permission error: which directory on the way to ``path`` this user cannot
    enter; "" for other errors."""
    if exc.errno not in (errno.EACCES, errno.EPERM):
        return ""
    absolute = Path(os.path.abspath(path))
    for ancestor in reversed(absolute.parents):
        if not os.access(ancestor, os.X_OK):
            user = f"this user (uid {os.getuid()})"
            return f'cannot be reached: "{ancestor}" is not enterable by {user}'
    return f"cannot be reached: {_reason(exc)}"


def _reason(exc: OSError) -> str:
    return (os.strerror(exc.errno) if exc.errno else str(exc)).lower()
