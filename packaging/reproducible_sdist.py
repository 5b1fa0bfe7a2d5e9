"""Rewrites an sdist so that one commit gives the same bytes from any checkout: members in
name order, times clamped to SOURCE_DATE_EPOCH, owned by root, no time in the gzip header.
setuptools keeps the checkout's file times and the build's directory times, which differ
from one clone (and one build) to the next. The wheels need no such step: wheel and
auditwheel clamp their times to SOURCE_DATE_EPOCH already.

    python3 reproducible_sdist.py dist/stanpkg-V.tar.gz
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import tarfile
from pathlib import Path


def normalize(path: Path, epoch: int) -> None:
    out = io.BytesIO()
    with (
        tarfile.open(path) as source,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as target,
    ):
        for member in sorted(source.getmembers(), key=lambda m: m.name):
            member.mtime = min(int(member.mtime), epoch)
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            member.pax_headers = {}
            data = source.extractfile(member) if member.isfile() else None
            target.addfile(member, data)
    path.write_bytes(gzip.compress(out.getvalue(), compresslevel=9, mtime=0))


def main(argv: list[str]) -> int:
    epoch = int(os.environ["SOURCE_DATE_EPOCH"])
    for name in argv:
        normalize(Path(name), epoch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
