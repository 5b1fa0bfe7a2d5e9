"""A record file rewritten whole through a temporary file named as Go's ``ioutil.TempFile``
names it, then renamed over the old one: ``clients.dat`` and ``subs.dat`` at compaction
(:func:`rewrite_records`, one procedure for both), ``server.dat`` when written atomically.

A crash or an error leaves the old file or the new one, never a part of either."""

from __future__ import annotations

import os
import random

from stanpkg.stores.file.format.framing import VERSION_HEADER, Buffer, write_all

__all__ = ["create_temp_file", "rewrite_records"]


def create_temp_file(directory: str, prefix: str) -> tuple[int, str]:
    """Go's ``ioutil.TempFile(dir, prefix)`` naming (prefix + random digits), with header."""
    for _ in range(10000):
        path = os.path.join(directory, f"{prefix}{random.randrange(1 << 31)}")
        try:
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600
            )
        except FileExistsError:
            continue
        write_all(fd, VERSION_HEADER)
        return fd, path
    raise FileExistsError(f"could not create a temporary file in {directory}")


def rewrite_records(
    directory: str, prefix: str, target: str, records: Buffer, *, fsync: bool
) -> None:
    """Replace ``target`` with the version header and ``records`` (framed), written to a
    temporary file ``<directory>/<prefix><digits>``, fsync'ed first when ``fsync``."""
    fd, tmp = create_temp_file(directory, prefix)
    try:
        write_all(fd, records)
        if fsync:
            os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
