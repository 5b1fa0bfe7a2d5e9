"""Syslog output for ``-s/--syslog`` and ``-r/--remote_syslog``, as the Go server sends it.

The reference (nats-server's ``logger/syslog.go`` over Go's ``log/syslog``) writes
``<PRI>TIMESTAMP HOSTNAME TAG[PID]: MESSAGE\\n`` to a remote server (RFC 3339 timestamp)
and ``<PRI>Mmm dd hh:mm:ss TAG[PID]: MESSAGE\\n`` to the local socket. The message is the
log text without the ``[INF]`` label (the priority carries the level); the facility is
``daemon`` locally and, remotely, ``kern`` (0): Go dials with ``LOG_DEBUG`` as the
priority, whose facility bits are zero; rules written for the Go server match ours.
The standard library's ``SysLogHandler`` does the transport.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import stat
import sys
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from stanpkg.plan.model import Plan
from stanpkg.plan.syslog_address import Address, SocketType, parse_remote_syslog

__all__ = [
    "LOCAL_SYSLOG_PATHS",
    "SyslogWriter",
    "open_local_syslog",
    "open_remote_syslog",
    "parse_remote_syslog",
    "syslog_for",
    "syslog_tag",
]

# Where Go's log/syslog looks for the local daemon, in its order.
LOCAL_SYSLOG_PATHS = ("/dev/log", "/var/run/syslog", "/var/run/log")

# Our level labels to syslog severities, as nats-server's SysLogger maps them (a trace
# line is a notice there).
_SEVERITY = {
    "INF": "notice",
    "WRN": "warning",
    "ERR": "err",
    "FTL": "crit",
    "DBG": "debug",
    "TRC": "notice",
}


def syslog_tag(syslog_name: str, argv0: str | None = None) -> str:
    """The program tag: ``syslog_name`` when set (several servers on one host), else the
    executable's name as Go's ``GetSysLoggerTag`` (``stanpkg``, ``nats-streaming-server``)."""
    if syslog_name:
        return syslog_name
    name = Path(argv0 if argv0 is not None else sys.argv[0]).name
    if not name or name.startswith("-") or name.endswith(".py"):
        return "stanpkg"  # python -c / python -m: no executable name to show
    return name


class _GoFormat(logging.Formatter):
    """The header Go's log/syslog writes after ``<PRI>`` (the handler adds that)."""

    def __init__(self, tag: str, remote: bool) -> None:
        super().__init__()
        self.remote = remote
        self.prefix = f"{tag}[{os.getpid()}]: "
        self.hostname = socket.gethostname()

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        end = "" if text.endswith("\n") else "\n"
        if self.remote:
            stamp = datetime.now().astimezone().isoformat(timespec="seconds")
            return f"{stamp} {self.hostname} {self.prefix}{text}{end}"
        stamp = datetime.now().strftime("%b %d %H:%M:%S")
        if stamp[4] == "0":  # Go's time.Stamp pads the day with a space
            stamp = stamp[:4] + " " + stamp[5:]
        return f"{stamp} {self.prefix}{text}{end}"


class _QuietHandler(logging.handlers.SysLogHandler):
    priority_map: ClassVar[dict[str, str]] = dict(_SEVERITY)

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # a lost syslog line must never take the server down, nor spill a traceback


class SyslogWriter:
    """Sends log lines to one syslog destination; ``write(level, text)`` with our level
    labels (``INF``, ``WRN``...)."""

    def __init__(self, handler: logging.handlers.SysLogHandler) -> None:
        self._handler = handler

    def write(self, level: str, text: str) -> None:
        record = logging.makeLogRecord({"msg": text, "levelname": level})
        self._handler.emit(record)

    def close(self) -> None:
        self._handler.close()


def _handler(
    address: Address, socktype: SocketType, facility: int, tag: str, remote: bool
) -> SyslogWriter:
    handler = _QuietHandler(address=address, facility=facility, socktype=socktype)
    connected: socket.socket = getattr(handler, "socket")  # noqa: B009 - untyped attribute
    if isinstance(address, str) and connected.fileno() == -1:
        # The standard library ignores a failed unix connect (and retries per line);
        # the reference refuses to start instead, and the local search needs to know.
        handler.close()
        raise OSError(f"cannot connect to {address}: {_why_not_a_listener(address)}")
    handler.append_nul = False  # Go ends each message with a newline, not a NUL
    handler.setFormatter(_GoFormat(tag, remote))
    return SyslogWriter(handler)


def _why_not_a_listener(path: str) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return exc.strerror or str(exc)
    return "connection refused" if stat.S_ISSOCK(mode) else "not a socket"


def open_remote_syslog(url: str, tag: str) -> SyslogWriter:
    """A writer to the ``-r`` address; ValueError for a bad URL, OSError when a stream or
    unix destination cannot be reached (the reference exits then too)."""
    address, socktype = parse_remote_syslog(url)
    return _handler(address, socktype, logging.handlers.SysLogHandler.LOG_KERN, tag, True)


def open_local_syslog(tag: str, paths: tuple[str, ...] = LOCAL_SYSLOG_PATHS) -> SyslogWriter:
    """A writer to the local syslog daemon (``-s``): the first of ``paths`` that accepts
    a connection; OSError when none does."""
    errors = []
    for path in paths:
        try:
            return _handler(path, None, logging.handlers.SysLogHandler.LOG_DAEMON, tag, False)
        except OSError as exc:
            errors.append(str(exc))
    raise OSError("no local syslog daemon (" + "; ".join(errors) + ")")


def syslog_for(plan: Plan) -> SyslogWriter | None:
    """The syslog destination the plan asks for, in the reference's order: none when a
    log file is set, else the remote address, else the local daemon."""
    ns = plan.nats_server
    if ns.log_file or not (ns.remote_syslog or ns.syslog):
        return None
    tag = syslog_tag(plan.syslog_name)
    if ns.remote_syslog:
        return open_remote_syslog(ns.remote_syslog, tag)
    return open_local_syslog(tag)
