"""The ``truncate_bad_eof`` repair (spec/filestore.md §10.4) and its witness file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from stanpkg.stores.file.format.errors import TruncateWitnessError, UnexpectedEOFError
from stanpkg.stores.file.format.framing import FILE_MODE

__all__ = [
    "TRUNCATE_WITNESS",
    "Truncation",
    "acquire_truncate_witness",
    "clear_truncate_witness",
    "truncate_file",
    "truncate_or_raise",
]

TRUNCATE_WITNESS = ".truncate.lck"


@dataclass
class Truncation:
    """Filled in by ``truncate_or_raise`` when a bad EOF was repaired."""

    offset: int | None = None
    error: UnexpectedEOFError | None = None
    log: list[str] = field(default_factory=list)


def truncate_file(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(offset)


@contextmanager
def truncate_or_raise(path: str, enabled: bool) -> Iterator[Truncation]:
    """Around a record scan: on UnexpectedEOFError, cut the file at the bad record when
    ``enabled`` (the scan then ends there), otherwise let the error propagate."""
    result = Truncation()
    try:
        yield result
    except UnexpectedEOFError as exc:
        if not enabled:
            raise
        truncate_file(path, exc.offset or 0)
        result.offset = exc.offset
        result.error = exc
        result.log = exc.log_lines(truncated=True)


def acquire_truncate_witness(root: str) -> None:
    """Create ``<root>/.truncate.lck`` exclusively: the option works for one open only."""
    try:
        fd = os.open(
            os.path.join(root, TRUNCATE_WITNESS), os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE
        )
    except FileExistsError:
        raise TruncateWitnessError(
            "file store should not be opened consecutively with the TruncateUnexpectedEOF "
            "option set to true",
            path=os.path.join(root, TRUNCATE_WITNESS),
        ) from None
    os.close(fd)


def clear_truncate_witness(root: str) -> None:
    """What an open *without* the option does (the read-only reader never calls it)."""
    with suppress(FileNotFoundError):
        os.unlink(os.path.join(root, TRUNCATE_WITNESS))
