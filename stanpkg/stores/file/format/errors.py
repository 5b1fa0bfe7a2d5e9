"""Errors of the FILE store format layer.

Every error carries the file path, the byte offset where the problem starts and a reason.
Reasons reuse the reference server's texts (spec/filestore.md §10.3) where one exists, so
log lines and error messages can be compared with the Go server's.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from stanpkg.stores.crypto import EncryptionError

__all__ = [
    "BadRecordHandler",
    "CorruptedRecordError",
    "FileStoreError",
    "FileVersionError",
    "IndexFileError",
    "IndexMismatchError",
    "IndexVerificationError",
    "InvalidRecordTypeError",
    "InvalidSliceNameError",
    "MessageDecryptionError",
    "MissingDataFileError",
    "RecordDecodeError",
    "RecordError",
    "ServerFileSizeError",
    "TruncateWitnessError",
    "UnexpectedEOFError",
    "dump_bytes",
]

RECORD_HEADER_SIZE = 8


class FileStoreError(Exception):
    """A problem found in a FILE store file: ``reason`` at ``offset`` of ``path``."""

    def __init__(
        self, reason: str, *, path: str | os.PathLike[str] | None = None, offset: int | None = None
    ) -> None:
        self.reason = reason
        self.path = os.fspath(path) if path is not None else None
        self.offset = offset
        super().__init__(reason)

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(f'file "{self.path}"')
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.reason} ({', '.join(where)})" if where else self.reason


# Receives a damaged record's error when a reader is asked to skip such records and go on
# (the pipeline's PERMISSIVE mode); without one, the error is raised.
BadRecordHandler = Callable[[FileStoreError], None]


class FileVersionError(FileStoreError):
    """Missing/short (e.g. zero-length file) or unsupported 4-byte file version header."""


class ServerFileSizeError(FileStoreError):
    """server.dat is not exactly version + one record."""


class InvalidRecordTypeError(FileStoreError):
    """A typed record carries a type the file does not define."""


class RecordDecodeError(FileStoreError):
    """A record's payload is not a valid protobuf of the expected message."""


class InvalidSliceNameError(FileStoreError):
    """A ``msgs.<N>.dat`` file whose N is not a decimal integer."""


class MissingDataFileError(FileStoreError):
    """A ``msgs.N.idx`` whose ``msgs.N.dat`` is gone, where no removal explains it."""


class TruncateWitnessError(FileStoreError):
    """truncate_bad_eof used on two consecutive opens (the witness file exists)."""


class IndexFileError(FileStoreError):
    """An index file that cannot be used (partial record, CRC mismatch)."""


class IndexVerificationError(FileStoreError):
    """The last index entry does not match the data file (§10.2)."""

    def __init__(self, detail: str, *, dat_path: str, offset: int | None = None) -> None:
        super().__init__(
            f'Verification of last message for file "{dat_path}" failed: {detail}',
            path=dat_path,
            offset=offset,
        )
        self.detail = detail


class IndexMismatchError(FileStoreError):
    """An index entry points at a record that is not the message it describes."""


class MessageDecryptionError(FileStoreError, EncryptionError):
    """A stored payload could not be decrypted (wrong key or corrupted data)."""


class RecordError(FileStoreError):
    """A bad record: keeps the bytes that were read so the Go-style dump can be printed."""

    def __init__(
        self,
        reason: str,
        *,
        path: str | os.PathLike[str] | None,
        offset: int,
        header: bytes,
        payload: bytes | None,
        typed: bool,
    ) -> None:
        super().__init__(reason, path=path, offset=offset)
        self.header = header
        self.payload = payload
        self.typed = typed

    def dump_lines(self) -> list[str]:
        """The reference's "Record header: …" dump, one ERR log entry per line."""
        lines = ["Record header:", " Bytes:", *dump_bytes(self.header, text=False)]
        if len(self.header) >= RECORD_HEADER_SIZE:
            first = int.from_bytes(self.header[:4], "little")
            crc = int.from_bytes(self.header[4:8], "little")
            if self.typed:
                lines.append(f" Type: {first >> 24}")
                lines.append(f" Size: {first & 0xFFFFFF}")
            else:
                lines.append(f" Size: {first}")
            lines.append(f" CRC : 0x{crc:08x}")
            lines.append("Record payload:")
            lines.extend(dump_bytes(self.payload or b"", text=True))
        return lines


class UnexpectedEOFError(RecordError):
    """A record header or payload cut short (the case truncate_bad_eof repairs)."""

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None,
        offset: int,
        header: bytes,
        payload: bytes | None,
        typed: bool,
        expected: int,
        read: int,
    ) -> None:
        super().__init__(
            "unexpected EOF",
            path=path,
            offset=offset,
            header=header,
            payload=payload,
            typed=typed,
        )
        self.expected = expected
        self.read = read

    @property
    def part(self) -> str:
        return "record payload" if len(self.header) >= RECORD_HEADER_SIZE else "record header"

    def log_lines(self, datastore_dir: str | None = None, *, truncated: bool = False) -> list[str]:
        """The reference's log lines for this error (with or without truncate_bad_eof)."""
        lines = [f'Unexpected EOF for file "{self.path}"']
        if not truncated:
            lines += [
                "It is recommended that you make a copy of the whole datatstore "
                f'"{datastore_dir or ""}".',
                "Restart with the ContinueOnUnexpectedEOF flag to truncate this file to this "
                f"offset: {self.offset}.",
                "Dataloss may occur. Details about the first corrupted record follows...",
            ]
        lines += self.dump_lines()
        if truncated:
            lines += [
                f'File "{self.path}" has been truncated to offset: {self.offset}',
                "Recovery resumes...",
            ]
        else:
            lines.append(f"{self.part} expected to be {self.expected} bytes, only read {self.read}")
        return lines


class CorruptedRecordError(RecordError):
    """CRC mismatch between a record header and its payload (never truncated)."""

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None,
        offset: int,
        header: bytes,
        payload: bytes,
        typed: bool,
        expected_crc: int,
        actual_crc: int,
    ) -> None:
        super().__init__(
            f"corrupted data, expected crc to be 0x{expected_crc:08x}, got 0x{actual_crc:08x}",
            path=path,
            offset=offset,
            header=header,
            payload=payload,
            typed=typed,
        )
        self.expected_crc = expected_crc
        self.actual_crc = actual_crc

    def log_lines(self) -> list[str]:
        return [f'Corrupted record in file "{self.path}": {self.reason}', *self.dump_lines()]


def dump_bytes(data: bytes, *, text: bool) -> list[str]:
    """Go's dumpBytes: 20 bytes a line, hex padded to 59 columns, then `` - `` and text."""
    lines = []
    for start in range(0, len(data), 20):
        chunk = data[start : start + 20]
        hexpart = chunk.hex(" ")
        if not text:
            lines.append(hexpart)
            continue
        shown = "".join(chr(b) if 32 <= b <= 128 else "." for b in chunk)
        lines.append(f"{hexpart}{' ' * (3 * (20 - len(chunk)))} - {shown}")
    return lines
