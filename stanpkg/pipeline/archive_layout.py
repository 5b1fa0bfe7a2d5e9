"""Where archived slices live, shared by the archive script (writer) and reads (reader).

When a slice is discarded with ``slice_archive_script`` set, the server renames its files
to ``<dir>/<channel>/msgs.N.dat.bak`` / ``.idx.bak`` and runs the script (filestore.md
§8.3). stanpkg's script moves them to::

    <archive>/<channel>/msgs.N.dat      <archive>/<channel>/msgs.N.idx

i.e. the channel-directory layout of a datastore, so the archive is readable with the
same slice reader. ``<archive>`` is ``$STANPKG_ARCHIVE_DIR`` or ``<dir>.archive`` beside
the datastore (not inside it: every directory of the root is taken for a channel, and a
channel directory is deleted with the channel).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = [
    "ARCHIVE_DIR_ENV",
    "ArchivedSlice",
    "archive_paths",
    "default_archive_dir",
    "find_archived_slices",
    "find_bak_slices",
]

ARCHIVE_DIR_ENV = "STANPKG_ARCHIVE_DIR"

_BAK = re.compile(r"^msgs\.([0-9]+)\.dat\.bak$")
_ARCHIVED = re.compile(r"^msgs\.([0-9]+)\.dat$")


@dataclass(frozen=True)
class ArchivedSlice:
    channel: str
    number: int
    dat_path: str
    idx_path: str  # may not exist (then the data file is scanned)


def default_archive_dir(datastore: str) -> str:
    """``$STANPKG_ARCHIVE_DIR``, else ``<datastore>.archive`` beside the datastore."""
    configured = os.environ.get(ARCHIVE_DIR_ENV, "")
    if configured:
        return os.path.abspath(configured)
    return os.path.abspath(os.path.normpath(datastore)) + ".archive"


def archive_paths(archive_dir: str, channel: str, number: int) -> tuple[str, str]:
    base = os.path.join(archive_dir, channel, f"msgs.{number}")
    return base + ".dat", base + ".idx"


def find_archived_slices(archive_dir: str) -> list[ArchivedSlice]:
    """Slices moved to the archive by the script, by channel then number."""
    found: list[ArchivedSlice] = []
    if not os.path.isdir(archive_dir):
        return found
    for channel_entry in os.scandir(archive_dir):
        if not channel_entry.is_dir():
            continue
        for entry in os.scandir(channel_entry.path):
            match = _ARCHIVED.match(entry.name)
            if match and entry.is_file():
                number = int(match.group(1))
                dat, idx = archive_paths(archive_dir, channel_entry.name, number)
                found.append(ArchivedSlice(channel_entry.name, number, dat, idx))
    return sorted(found, key=lambda s: (s.channel, s.number))


def find_bak_slices(datastore: str) -> list[ArchivedSlice]:
    """``.bak`` slices still in channel directories (script not run yet, or failed)."""
    found: list[ArchivedSlice] = []
    for channel_entry in os.scandir(datastore):
        if not channel_entry.is_dir():
            continue
        for entry in os.scandir(channel_entry.path):
            match = _BAK.match(entry.name)
            if match and entry.is_file():
                dat = entry.path
                idx = dat[: -len(".dat.bak")] + ".idx.bak"
                found.append(ArchivedSlice(channel_entry.name, int(match.group(1)), dat, idx))
    return sorted(found, key=lambda s: (s.channel, s.number))
