"""The server's logger, writing lines exactly like the Go server's logger does.

``[<pid>] 2019/02/07 11:50:46.263911 [INF] STREAM: <text>`` (no date when ``logtime`` is
off). Streaming lines carry the ``STREAM: `` prefix; lines of the embedded NATS server
are re-emitted without it, as the reference (which embeds NATS in-process) prints them.
Operators' log tooling keys on this format, so it must not drift.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from datetime import datetime
from typing import TextIO

from stanpkg.plan.redact import redact_urls
from stanpkg.server.syslog import SyslogWriter

__all__ = ["Logger", "format_line", "parse_nats_line"]

STREAM_PREFIX = "STREAM: "

# The NATS server's own lines: "[pid] date time [LVL] text" (date optional).
_NATS_LINE = re.compile(r"^\[\d+\] (?:\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d+ )?\[([A-Z]{3})\] (.*)$")


def format_line(pid: int, level: str, text: str, logtime: bool, now: datetime | None = None) -> str:
    if not logtime:
        return f"[{pid}] [{level}] {text}"
    stamp = (now or datetime.now()).strftime("%Y/%m/%d %H:%M:%S.%f")
    return f"[{pid}] {stamp} [{level}] {text}"


def parse_nats_line(line: str) -> tuple[str, str]:
    """(level, text) of a nats-server log line; unknown shapes are kept whole as INF."""
    match = _NATS_LINE.match(line)
    if match is None:
        return "INF", line
    return match.group(1), match.group(2)


class Logger:
    """Go-format logger to stderr, a file or syslog; thread-safe; ``reopen`` for SIGUSR1.

    As the reference, a log file wins over syslog (the caller passes ``syslog`` only
    without one); syslog lines carry the text alone, the level becomes the priority.
    """

    def __init__(
        self,
        *,
        log_file: str = "",
        logtime: bool = True,
        debug: bool = False,
        trace: bool = False,
        stream: TextIO | None = None,
        syslog: SyslogWriter | None = None,
    ) -> None:
        self.pid = os.getpid()
        self.log_file = log_file
        self.logtime = logtime
        self.debug_enabled = debug
        self.trace_enabled = trace
        self._lock = threading.Lock()
        self._stream: TextIO = stream if stream is not None else sys.stderr
        self._file: TextIO | None = None
        self._syslog = syslog if not log_file else None
        if log_file:
            self._file = self._open(log_file)

    @staticmethod
    def _open(path: str) -> TextIO:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o660)
        return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")

    def _write(self, level: str, text: str) -> None:
        text = redact_urls(text)  # e.g. a NATS URL with its password, in a reconnect line
        if self._syslog is not None:
            with self._lock:
                self._syslog.write(level, text)
            return
        line = format_line(self.pid, level, text, self.logtime) + "\n"
        with self._lock:
            out = self._file if self._file is not None else self._stream
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):
                pass  # a closed/broken log output must never take the server down

    # Streaming-server lines.
    def notice(self, text: str) -> None:
        self._write("INF", STREAM_PREFIX + text)

    def warn(self, text: str) -> None:
        self._write("WRN", STREAM_PREFIX + text)

    def error(self, text: str) -> None:
        self._write("ERR", STREAM_PREFIX + text)

    def fatal(self, text: str) -> None:
        self._write("FTL", STREAM_PREFIX + text)

    def debug(self, text: str) -> None:
        if self.debug_enabled:
            self._write("DBG", STREAM_PREFIX + text)

    def trace(self, text: str) -> None:
        if self.trace_enabled:
            self._write("TRC", STREAM_PREFIX + text)

    def nats_line(self, line: str) -> None:
        """Re-emit one line printed by the embedded nats-server under our pid."""
        line = line.rstrip("\r\n")
        if line:
            level, text = parse_nats_line(line)
            self._write(level, text)

    def reopen(self) -> None:
        """SIGUSR1: reopen the log file (after rotation)."""
        if not self.log_file:
            self.notice("File log re-open ignored, not a file logger")
            return
        error: OSError | None = None
        with self._lock:
            old = self._file
            try:
                self._file = self._open(self.log_file)
            except OSError as exc:
                error = exc
            else:
                if old is not None:
                    old.close()
        if error is not None:
            self.error(f"Unable to re-open log file: {error}")
        else:
            self.notice("File log re-opened")

    def close(self) -> None:
        with self._lock:
            if self._syslog is not None:
                self._syslog.close()
                self._syslog = None
            if self._file is not None:
                self._file.close()
                self._file = None
                self._stream = sys.stderr
