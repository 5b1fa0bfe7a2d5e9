"""What a migration reads: the store a standalone server's configuration describes, as
records, channels and a reader of their messages. :mod:`.source_factory` opens one, a FILE
store through :mod:`.file_source`, an SQL store through :mod:`.sql_source`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from stanpkg.plan.limits import Limits
from stanpkg.stores.base import ClientRecord, RecoveredSubscription, ServerInfo

__all__ = [
    "MessageReader",
    "OnBadRecord",
    "SourceChannel",
    "SourceError",
    "SourceMessage",
    "SourceStore",
]


class SourceError(Exception):
    """The source cannot be read (the text names the file and offset when known)."""


class SourceMessage(NamedTuple):
    sequence: int
    reply: str
    timestamp: int  # ns, as stored
    data: bytes


@dataclass(frozen=True)
class SourceChannel:
    """A channel as the standalone server would recover it. ``first_seq > last_seq`` when
    every message was removed; both 0 when it never had one."""

    name: str
    first_seq: int
    last_seq: int
    msg_count: int
    total_bytes: int
    limits: Limits
    subscriptions: tuple[RecoveredSubscription, ...]


OnBadRecord = Callable[[str], None]


class MessageReader(Protocol):
    def messages(
        self, channel: str, from_seq: int, on_bad: OnBadRecord | None
    ) -> Iterator[SourceMessage]:
        """The channel's messages from ``from_seq`` on, in sequence order; a damaged
        record is a :class:`SourceError`, or reported to ``on_bad`` and skipped."""
        ...


@dataclass
class SourceStore:
    """A recovered source: records, channels, and a reader of their messages.
    ``skipped``: the damaged records passed over (``permissive``)."""

    description: str
    server_info: ServerInfo | None
    clients: tuple[ClientRecord, ...]
    channels: tuple[SourceChannel, ...]
    _reader: MessageReader
    permissive: bool = False
    skipped: list[str] = field(default_factory=list)

    def messages(self, channel: str, from_seq: int = 0) -> Iterator[SourceMessage]:
        """The channel's messages from ``from_seq`` on, in sequence order."""
        on_bad = self.note_skipped if self.permissive else None
        return self._reader.messages(channel, from_seq, on_bad)

    def note_skipped(self, text: str) -> None:
        if text not in self.skipped:  # a resumed or verifying pass meets it again
            self.skipped.append(text)
