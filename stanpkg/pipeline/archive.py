"""``slice_archive_script``: move a slice the server discarded into the archive.

The server renames a discarded slice to ``msgs.N.dat.bak``/``msgs.N.idx.bak`` and runs the
script with three arguments: channel, full path of the ``.dat.bak``, full path of the
``.idx.bak`` (filestore.md §8.3). Its output goes to the server log. Layout of the archive:
see ``archive_layout``.

Never lose a slice: each file is first made durable in the archive (hard link, or copy +
fsync when the archive is on another filesystem, then an atomic rename), and only then
removed from the datastore. An interrupted run leaves the source in place; running again
finishes the job (a target with identical content counts as done). The index is moved
before the data file, whose appearance is what makes the slice visible to readers.

Usage: ``python -m stanpkg.pipeline.archive CHANNEL DATFILE IDXFILE``
(also ``stanpkg archive-slice``). Exit status 0 when the slice is archived.
"""

from __future__ import annotations

import errno
import filecmp
import os
import re
import shutil
import sys

from stanpkg.pipeline.archive_layout import ARCHIVE_DIR_ENV, archive_paths, default_archive_dir

__all__ = ["ArchiveError", "archive_slice", "main"]

_DAT_BAK = re.compile(r"^msgs\.([0-9]+)\.dat\.bak$")
USAGE = "usage: archive-slice CHANNEL DATFILE IDXFILE"


class ArchiveError(Exception):
    pass


def archive_slice(
    channel: str, dat_path: str, idx_path: str, archive_dir: str | None = None
) -> tuple[str, str]:
    """Move both files into the archive; returns the archived (dat, idx) paths."""
    name = os.path.basename(dat_path)
    match = _DAT_BAK.match(name)
    if match is None:
        raise ArchiveError(f"not a discarded slice data file (msgs.N.dat.bak): {dat_path}")
    number = int(match.group(1))
    if "/" in channel or channel in ("", ".", ".."):
        raise ArchiveError(f"invalid channel name: {channel!r}")
    datastore = os.path.dirname(os.path.dirname(os.path.abspath(dat_path)))
    archive = archive_dir or default_archive_dir(datastore)
    target_dat, target_idx = archive_paths(archive, channel, number)
    os.makedirs(os.path.dirname(target_dat), exist_ok=True)
    _fsync(archive)
    # The index is optional for readers (they rebuild it from the data file).
    _move_durably(idx_path, target_idx, required=False)
    _move_durably(dat_path, target_dat, required=True)
    return target_dat, target_idx


def _move_durably(source: str, target: str, *, required: bool) -> None:
    source_exists = os.path.exists(source)
    if os.path.exists(target):
        if source_exists and not _same_content(source, target):
            raise ArchiveError(
                f"{target} already exists with other content; {source} is left in place"
            )
        # Already archived (an earlier run was interrupted after the copy).
    elif not source_exists:
        if required:
            raise ArchiveError(f"{source} not found and not archived yet")
        return
    else:
        _durable_copy(source, target)
    if source_exists:
        os.unlink(source)
        _fsync(os.path.dirname(source))


def _durable_copy(source: str, target: str) -> None:
    directory = os.path.dirname(target)
    try:
        # Same filesystem: a hard link appears atomically with the whole content.
        os.link(source, target)
        _fsync(target)  # the server may not have synced it
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        temp = os.path.join(directory, f".{os.path.basename(target)}.{os.getpid()}.tmp")
        try:
            with open(source, "rb") as src, open(temp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(temp, target)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
    _fsync(directory)


def _same_content(a: str, b: str) -> bool:
    return filecmp.cmp(a, b, shallow=False)


def _fsync(path: str) -> None:
    """fsync a file or a directory (a directory's entries: links, renames, unlinks)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or any(a in ("-h", "--help") for a in args):
        print(USAGE, file=sys.stderr)
        print(f"archive folder: ${ARCHIVE_DIR_ENV}, or <datastore>.archive", file=sys.stderr)
        return 2
    channel, dat_path, idx_path = args
    try:
        dat, _ = archive_slice(channel, dat_path, idx_path)
    except (ArchiveError, OSError) as exc:
        print(f"archive-slice: {channel}: {exc}", file=sys.stderr)
        return 1
    print(f"archived {os.path.basename(dat_path)} of {channel} to {os.path.dirname(dat)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
