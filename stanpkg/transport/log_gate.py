"""Holding the embedded nats-server between opening its client port and accepting on it.

nats-server opens its client port, logs "Listening for client connections", and only then
starts accepting. A client polling the port connects as it opens; the server's own
connection, opened then too, raced it to subscribe to the discover subject (claim.py),
and lost now and then on a busy machine. NATS cannot hold a subject before its port opens,
but its log write can hold its accept loop: nats-server logs through a pipe this process
reads, and a write to a full pipe waits.

So the pipe is one page (4 KiB), and the line nats-server writes just before it listens,
``Using configuration file: <path> (sha256:<digest>)``, is made to fill a page by padding
the path with ``./``: too long to join the page of the lines before it, it starts a page
of its own, which the lines expected before the "Listening" line then fill to within less
than that line. The reader takes all of that page but its last byte, so the page stays
full and the "Listening" line's write waits: the port accepts connections into its
backlog, nats-server reads none. The server's connections connect then (their CONNECT and
SUB wait in the backlog, ahead of what any client can send, which needs nats-server's
INFO first), and the pipe is widened: nats-server writes the line and accepts.

Only where it can hold exactly: Linux (``F_SETPIPE_SZ``, 4 KiB pages), a fixed client
port (a random one is learnt from the "Listening" line itself), nats-server writing its
log through the pipe. A line it writes that the padding did not expect leaves it waiting
before it listens: the server's connections then find the port closed for
``CLAIM_PATIENCE`` and the pipe is widened, and they connect when the "Listening" line
comes, as without the gate. Written by hand: no library reads a pipe this way.

What the gate leaves to chance: once let go, nats-server accepts the queued connections
and starts each in a goroutine of its own, so a client's two round trips can, rarely,
beat the first read of every claim. No other listener can carry the claims' SUB while
nats-server waits: it writes the "Listening" line holding its server lock, which a
websocket or leafnode connection needs to register (nats-server 2.15).
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from collections.abc import Sequence

__all__ = ["HELD_PAGE", "MARKER", "narrow", "padded_config_path", "read_page", "widen"]

PAGE = 4096
HELD_PAGE = PAGE // 2  # a page this full holds the padded line: the lines before are short
WIDE = 65536  # Linux's default pipe size
MARKER = b"Using configuration file: "
# "[<pid>] 2006/01/02 15:04:05.000000 [INF] " and the newline, a pid of 7 digits at most
# (Linux's pid_max): shorter pids leave up to 6 bytes more room, less than any line.
_LINE_OVERHEAD = len("[4194304] 2006/01/02 15:04:05.000000 [INF] \n")
_DIGEST = len(" (sha256:)") + 64


def padded_config_path(path: str, expected_between: Sequence[str]) -> str:
    """``path`` padded with ``./`` so that the line naming it fills its page up to the
    room ``expected_between`` (messages nats-server logs between it and the "Listening"
    line, each at its longest) take; ``path`` itself when it is too long already."""
    head, name = os.path.split(path)
    between = sum(_LINE_OVERHEAD + len(message) for message in expected_between)
    wanted = PAGE - between - _LINE_OVERHEAD - len(MARKER) - _DIGEST
    pad = wanted - len(path)
    if pad < 2:
        return path
    # "//" is "/" too: an odd padding starts with one.
    return f"{head}/{'/' * (pad % 2)}{'./' * (pad // 2)}{name}"


def narrow(fd: int) -> bool:
    """Make the pipe of ``fd`` (empty) one page; False where that cannot hold the gate."""
    if not sys.platform.startswith("linux"):
        return False
    import fcntl  # Unix only: this module is imported everywhere
    import resource

    if resource.getpagesize() != PAGE:
        return False
    try:
        return int(fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PAGE)) == PAGE
    except (OSError, AttributeError):
        return False


def widen(fd: int) -> None:
    """The pipe of ``fd`` back to its usual size: a waiting write goes in at once."""
    import fcntl

    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, WIDE)


def read_page(fd: int) -> tuple[bytes, bool]:
    """What the pipe ``fd`` holds (waiting for something), and whether its last byte was
    left in it: it is, from a page at least HELD_PAGE full, which then stays full."""
    import fcntl
    import termios

    first = os.read(fd, 1)
    if not first:
        return b"", False
    waiting = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    if 1 + waiting >= HELD_PAGE:
        return first + os.read(fd, waiting - 1), True
    return first + (os.read(fd, waiting) if waiting else b""), False
