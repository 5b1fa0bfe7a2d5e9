"""Incremental parser of the NATS server→client protocol.

It works on whole socket reads: each ``feed()`` scans the bytes with ``bytes.find`` and
slicing, and calls the subscription's handler synchronously for every MSG found — no
regular expression, no object, task or future per message. A message split across reads
is kept as a list of chunks and parsed again only once enough bytes have arrived, so a
large payload arriving in many small reads costs one join, not one per read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from stanpkg.hot_path import mypyc_attr
from stanpkg.transport.errors import ProtocolError

MsgHandler = Callable[[str, str, bytes], None]
"""(subject, reply, payload) — called synchronously from the parse loop."""

StatusHandler = Callable[[str, int], None]
"""(subject, status code) — for header-only status messages such as 503 no responders."""

HeaderMsgHandler = Callable[[str, str, bytes, bytes], None]
"""(subject, reply, headers, payload) — ``headers`` is the raw ``NATS/1.0...`` block, or
empty for a message published without headers."""

_BAD_KEY = re.compile(r"[:\s]")
_BAD_VALUE = re.compile(r"[\r\n]")

# Longest control line (MSG/INFO/-ERR ...) accepted before the parser declares garbage.
MAX_CONTROL_LINE = 64 * 1024
# MSG lines remembered per connection (ProtocolParser._msg_line); about 100 KB at most.
_MSG_LINES_KEPT = 1024

MsgLine = tuple[bytes, str, str, int]
"""A MSG control line read: (sid as on the wire, subject, reply, payload size)."""


class Subscription:
    __slots__ = (
        "handler",
        "header_handler",
        "max_msgs",
        "queue",
        "received",
        "sid",
        "sid_bytes",
        "status_handler",
        "subject",
    )

    def __init__(
        self,
        sid: int,
        subject: str,
        queue: str,
        handler: MsgHandler,
        status_handler: StatusHandler | None = None,
        header_handler: HeaderMsgHandler | None = None,
    ) -> None:
        self.sid = sid
        self.sid_bytes = str(sid).encode()
        self.subject = subject
        self.queue = queue
        self.handler = handler
        self.status_handler = status_handler
        # Set for subscriptions that want headers: HMSGs go to it whole (status messages
        # included), while ``handler`` adapts plain MSGs, so the MSG path stays as is.
        self.header_handler = header_handler
        self.max_msgs = 0
        self.received = 0


HEADER_LINE = b"NATS/1.0"


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """The ``NATS/1.0`` header block of an HPUB. ValueError for a key or value that would
    break the block (CR, LF; ':' or whitespace in a key)."""
    lines = [HEADER_LINE]
    for key, value in headers.items():
        if not key or _BAD_KEY.search(key) or _BAD_VALUE.search(value):
            raise ValueError(f"invalid NATS header {key!r}: {value!r}")
        lines.append(f"{key}: {value}".encode())
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


def decode_headers(block: bytes) -> tuple[int, dict[str, str]]:
    """(status code or 0, headers) of a received header block; a repeated key keeps its
    last value."""
    first, _, rest = block.partition(b"\r\n")
    status = _header_status(first)
    headers: dict[str, str] = {}
    for line in rest.split(b"\r\n"):
        key, colon, value = line.partition(b":")
        if colon and key:
            headers[key.decode(errors="replace")] = value.strip().decode(errors="replace")
    return status, headers


def _header_status(header: bytes) -> int:
    """The status code of a ``NATS/1.0 503`` header line, or 0."""
    first = header.split(b"\r\n", 1)[0]
    parts = first.split()
    if len(parts) >= 2 and parts[1].isdigit():
        return int(parts[1])
    return 0


# Compiled (stanpkg/hot_path.py), it is still subclassed by the interpreted ClientProtocol.
@mypyc_attr(allow_interpreted_subclasses=True)
class ProtocolParser:
    """Parses server output and dispatches it. Subclasses implement the ``_on_*`` hooks.

    ``subs`` is shared with the owner (keyed by the sid's ASCII bytes, as it appears on the
    wire) so dispatch needs a single dict lookup.
    """

    def __init__(self, subs: dict[bytes, Subscription]) -> None:
        self._subs = subs
        self._chunks: list[bytes] = []
        self._chunks_len = 0
        self._need = 0  # bytes the unparsed remainder must reach before parsing again
        self._info_seen = False
        # MSG control lines seen, each read once: (sid, subject, reply, payload size).
        self._msg_lines: dict[bytes, MsgLine] = {}
        self._line_guess = 0  # the length of the last control line read
        self.in_msgs = 0
        self.in_bytes = 0

    # -- hooks -----------------------------------------------------------------------------
    def _on_info(self, info: dict[str, Any]) -> None:
        raise NotImplementedError

    def _on_ping(self) -> None:
        raise NotImplementedError

    def _on_pong(self) -> None:
        raise NotImplementedError

    def _on_err(self, text: str) -> None:
        raise NotImplementedError

    def _on_handler_error(self, exc: Exception) -> None:
        raise NotImplementedError

    def _on_sub_done(self, sub: Subscription) -> None:
        """The subscription reached its ``max_msgs``."""
        raise NotImplementedError

    # -- input -----------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Consume one socket read. Raises ProtocolError on input that is not NATS."""
        self.in_bytes += len(data)
        if self._chunks:
            self._chunks.append(data)
            self._chunks_len += len(data)
            if self._chunks_len < self._need:
                return
            data = b"".join(self._chunks)
            self._chunks = []
            self._chunks_len = 0
        if not self._info_seen:
            if len(data) < 5 and b"INFO ".startswith(data):
                self._keep(data, 0, len(data) + 1)
                return
            if not data.startswith(b"INFO"):
                raise ProtocolError("nats: protocol exception, INFO not received")
        try:
            pos = self._parse(data)
        except (ValueError, IndexError) as exc:
            raise ProtocolError(f"nats: parse error: {exc}") from exc
        if pos < len(data):
            self._chunks = [data[pos:]]
            self._chunks_len = len(data) - pos

    def _keep(self, data: bytes, pos: int, need: int) -> None:
        self._chunks = [data[pos:]]
        self._chunks_len = len(data) - pos
        self._need = need

    def _parse(self, buf: bytes) -> int:
        """Parse complete operations; return the offset of the first unconsumed byte."""
        subs = self._subs
        msg_lines = self._msg_lines
        find = buf.find
        size_total = len(buf)
        pos = 0
        msgs = 0
        guess = self._line_guess
        while pos < size_total:
            # The line is most often as long as the one before: two bytes read confirm the
            # guess for a remembered line (which holds no CRLF), instead of a search.
            known = None
            eol = pos + guess
            if guess and eol + 1 < size_total and buf[eol] == 13 and buf[eol + 1] == 10:
                line = buf[pos:eol]
                known = msg_lines.get(line)
            if known is None:
                eol = find(b"\r\n", pos)
                if eol < 0:
                    if size_total - pos > MAX_CONTROL_LINE:
                        raise ProtocolError("nats: maximum control line exceeded")
                    self._need = size_total - pos + 1
                    break
                line = buf[pos:eol]
                known = msg_lines.get(line)
                guess = eol - pos
            if known is None:
                args = line.split()
                if args and args[0] == b"HMSG":
                    # HMSG <subject> <sid> [reply] <header size> <total size>
                    start = eol + 2
                    header_end = start + int(args[-2])
                    end = start + int(args[-1])
                    if end + 2 > size_total:
                        self._need = end + 2 - pos
                        break
                    if buf[end : end + 2] != b"\r\n" or not start <= header_end <= end:
                        raise ProtocolError("nats: parse error: message payload not terminated")
                    pos = end + 2
                    msgs += 1
                    self._dispatch_hmsg(args, buf[start:header_end], buf[header_end:end])
                    continue
                if not args or args[0] != b"MSG":
                    self._control(line)
                    pos = eol + 2
                    continue
                known = self._msg_line(line, args)
            sid, subject, reply, size = known
            start = eol + 2
            end = start + size
            if end + 2 > size_total:
                self._need = end + 2 - pos
                break
            if buf[end] != 13 or buf[end + 1] != 10:
                raise ProtocolError("nats: parse error: message payload not terminated")
            pos = end + 2
            msgs += 1
            sub = subs.get(sid)
            if sub is None:
                continue  # unsubscribed while in flight
            sub.received += 1
            try:
                sub.handler(subject, reply, buf[start:end])
            except Exception as exc:
                self._on_handler_error(exc)
            if sub.max_msgs and sub.received >= sub.max_msgs:
                self._on_sub_done(sub)
        self.in_msgs += msgs
        self._line_guess = guess
        return pos

    def _msg_line(self, line: bytes, args: list[bytes]) -> MsgLine:
        """Read ``MSG <subject> <sid> [reply] <size>`` and remember it: a connection gets
        the same few lines again and again (one subscription, one reply inbox, one size),
        so a dictionary lookup replaces the split, two decodes and the number's parse."""
        if len(args) not in (4, 5):
            raise ProtocolError("nats: parse error: malformed MSG line")
        size = int(args[-1])
        if size < 0:
            raise ProtocolError("nats: parse error: negative message size")
        known = (args[2], args[1].decode(), args[3].decode() if len(args) == 5 else "", size)
        if len(self._msg_lines) >= _MSG_LINES_KEPT:
            self._msg_lines.clear()  # replies unique per message: start again, bounded
        self._msg_lines[line] = known
        return known

    def _dispatch_hmsg(self, args: list[bytes], header: bytes, payload: bytes) -> None:
        # A subscription without a header handler gets the payload only, except that
        # header-only status messages (503 no responders) go to its status handler.
        sub = self._subs.get(args[2])
        if sub is None:
            return
        subject = args[1].decode()
        header_handler = sub.header_handler
        if header_handler is None and not payload and sub.status_handler is not None:
            status = _header_status(header)
            if status:
                try:
                    sub.status_handler(subject, status)
                except Exception as exc:
                    self._on_handler_error(exc)
                return
        sub.received += 1
        reply = args[3].decode() if len(args) == 6 else ""
        try:
            if header_handler is not None:
                header_handler(subject, reply, header, payload)
            else:
                sub.handler(subject, reply, payload)
        except Exception as exc:
            self._on_handler_error(exc)
        if sub.max_msgs and sub.received >= sub.max_msgs:
            self._on_sub_done(sub)

    def _control(self, line: bytes) -> None:
        op, _, rest = line.partition(b" ")
        op = op.upper()
        if op == b"PING":
            self._on_ping()
        elif op == b"PONG":
            self._on_pong()
        elif op == b"+OK":
            pass
        elif op == b"-ERR":
            self._on_err(rest.strip().strip(b"'").decode(errors="replace"))
        elif op == b"INFO":
            try:
                info = json.loads(rest)
            except ValueError as exc:
                raise ProtocolError(f"nats: parse error: invalid INFO: {exc}") from exc
            if not isinstance(info, dict):
                raise ProtocolError("nats: parse error: invalid INFO")
            self._info_seen = True
            self._on_info(info)
        else:
            shown = line[:32].decode(errors="replace")
            raise ProtocolError(f"nats: parse error: unknown protocol operation '{shown}'")
