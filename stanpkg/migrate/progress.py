"""Progress of a migration: channels, messages, bytes and rate, as text lines (a bar that
rewrites itself on a terminal) or JSON lines, at most one per interval."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Progress"]


@dataclass
class Progress:
    """Counts of one migration and the lines that report them."""

    emit: Callable[[str], None]
    channels_total: int
    messages_total: int
    interval: float = 2.0
    as_json: bool = False
    terminal: bool = False
    channels_done: int = 0
    messages: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.monotonic)
    _last_line: float = 0.0

    @property
    def seconds(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)

    def add(self, messages: int, size: int) -> None:
        self.messages += messages
        self.bytes += size
        self.tick()

    def channel_done(self) -> None:
        self.channels_done += 1
        self.tick(force=True)

    def tick(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.interval <= 0 or (not force and now - self._last_line < self.interval):
            return
        self._last_line = now
        self.emit(self.line())

    def figures(self) -> dict[str, float | int]:
        seconds = self.seconds
        return {
            "channels_done": self.channels_done,
            "channels": self.channels_total,
            "messages": self.messages,
            "messages_total": self.messages_total,
            "bytes": self.bytes,
            "seconds": round(seconds, 3),
            "msgs_per_s": round(self.messages / seconds, 1),
            "mb_per_s": round(self.bytes / seconds / 1e6, 3),
        }

    def line(self) -> str:
        f = self.figures()
        if self.as_json:
            return json.dumps({"progress": f}, sort_keys=True)
        total = max(self.messages_total, 1)
        share = min(self.messages / total, 1.0)
        bar = ("#" * int(share * 30)).ljust(30, ".") if self.terminal else ""
        text = (
            f"channels {self.channels_done}/{self.channels_total}, messages "
            f"{self.messages:,}/{self.messages_total:,}, {self.bytes / 1e6:,.1f} MB, "
            f"{f['msgs_per_s']:,.0f} msgs/s, {f['mb_per_s']:,.2f} MB/s"
        )
        return f"[{bar}] {share:6.1%} {text}" if bar else text
