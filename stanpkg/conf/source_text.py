"""Configuration text and its positions: reading files, decoding, offset -> line:col."""

from __future__ import annotations

import errno
import os
import re
from bisect import bisect_right

from stanpkg.conf.errors import ConfError, Position

_BOM = "\ufeff"

# C0 controls other than TAB/LF/CR, DEL, C1 controls and lone surrogates (which only
# reach us through leniently decoded text). None of them belongs in a config file, not
# even in a comment; inside strings they can be written as \xXX escapes.
_BAD_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


class SourceText:
    """One text being parsed, with a name for positions (a path or e.g. ``<string>``).

    Not :class:`stanpkg.plan.model.Source`, which says where a configured value came from
    (the default, a file position, a flag, the environment): this is the text itself."""

    __slots__ = ("_line_starts", "name", "text")

    def __init__(self, text: str, name: str) -> None:
        # A byte-order mark is invisible in editors: drop it so columns match what the
        # user sees (the Go parser would make it part of the first key).
        if text.startswith(_BOM):
            text = text[1:]
        self.text = text
        self.name = name
        starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self._line_starts = starts

    def pos(self, offset: int) -> Position:
        line = bisect_right(self._line_starts, offset)
        return Position(self.name, line, offset - self._line_starts[line - 1] + 1)

    def check_characters(self) -> None:
        """Reject control characters and lone surrogates anywhere in the text."""
        m = _BAD_CHAR.search(self.text)
        if m is not None:
            code = ord(m.group())
            what = "lone surrogate" if code >= 0xD800 else "control character"
            raise ConfError(self.pos(m.start()), f"{what} U+{code:04X} is not allowed here")


def read_text(path: str, at: Position | None, what: str) -> str:
    """The UTF-8 text of ``path``; failures are positioned at ``at``.

    ``what`` names the file in messages, e.g. ``include file 'x.conf'``. Without ``at`` (a
    top-level file) a failure is ``cannot read PATH: reason`` at ``path:0:0``, the file as
    a whole, which callers show without the position.
    """
    where = at if at is not None else Position(path, 0, 0)
    try:
        # Only regular files: reading a FIFO or a device could block or never end.
        if not os.path.isfile(path):
            exists = os.path.exists(path)
            reason = "not a regular file" if exists else os.strerror(errno.ENOENT)
            if at is None:
                raise ConfError(where, f"cannot read {path}: {reason}")
            raise ConfError(where, f"{what} {'is not a regular file' if exists else 'not found'}")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        shown = path if at is None else what
        raise ConfError(where, f"cannot read {shown}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfError(
            _byte_position(path, data, e.start), f"invalid UTF-8 byte 0x{data[e.start]:02x}"
        ) from None


def _byte_position(path: str, data: bytes, offset: int) -> Position:
    line_start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset) + 1
    col = len(data[line_start:offset].decode("utf-8", "replace")) + 1
    if line == 1 and data.startswith(_BOM.encode()):
        col -= 1
    return Position(path, line, col)
