"""``--verify``: each channel's messages in the source and in the destination, side by side —
count, first and last sequence, every sequence, reply, timestamp and payload — with a
SHA-256 of each side, so that a difference is named by channel and sequence."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from stanpkg.migrate.destination import Destination, Message
from stanpkg.migrate.source_store import SourceChannel, SourceStore

__all__ = ["ChannelCheck", "digest_update", "verify_channel"]

MAX_DIFFERENCES = 10  # listed per channel; the counts tell the rest
_FIXED = struct.Struct(">QqI")


def digest_update(digest: hashlib._Hash, message: Message) -> None:
    """Every field of the message, length-prefixed (no two messages hash alike by shifting
    bytes from one field to the next)."""
    reply = message.reply.encode()
    digest.update(_FIXED.pack(message.sequence, message.timestamp, len(reply)))
    digest.update(reply)
    digest.update(len(message.data).to_bytes(8, "big"))
    digest.update(message.data)


@dataclass
class Side:
    count: int = 0
    first: int = 0
    last: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)

    def add(self, message: Message) -> None:
        self.count += 1
        self.first = self.first or message.sequence
        self.last = message.sequence
        digest_update(self.digest, message)

    def as_dict(self) -> dict[str, object]:
        return {
            "messages": self.count,
            "first_seq": self.first,
            "last_seq": self.last,
            "sha256": self.digest.hexdigest(),
        }


@dataclass
class ChannelCheck:
    name: str
    source: Side
    destination: Side
    differences: list[str]

    @property
    def ok(self) -> bool:
        return not self.differences and self.source.as_dict() == self.destination.as_dict()

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "ok": self.ok,
            "source": self.source.as_dict(),
            "destination": self.destination.as_dict(),
            "differences": self.differences,
        }


def _compare(source: Message | None, stored: Message | None) -> str:
    if stored is None:
        assert source is not None
        return f"sequence {source.sequence}: missing from the destination"
    if source is None:
        return f"sequence {stored.sequence}: not in the source"
    fields = [
        name
        for name in ("reply", "timestamp", "data")
        if getattr(source, name) != getattr(stored, name)
    ]
    return f"sequence {source.sequence}: {', '.join(fields)} differ" if fields else ""


async def verify_channel(
    source: SourceStore, channel: SourceChannel, destination: Destination
) -> ChannelCheck:
    """Both sides of one channel, in sequence order, compared message by message."""
    check = ChannelCheck(channel.name, Side(), Side(), [])
    state = await destination.channel_state(channel.name)
    if state is None:
        check.differences.append("not in the destination")
    theirs = (
        destination.read_messages(channel.name, state.first_seq, state.last_seq)
        if state is not None and state.msgs
        else None
    )
    pending: Message | None = await _next(theirs)
    for found in source.messages(channel.name):
        mine = Message(found.sequence, found.reply, found.timestamp, found.data)
        check.source.add(mine)
        while pending is not None and pending.sequence < mine.sequence:
            _note(check, _compare(None, pending))
            check.destination.add(pending)
            pending = await _next(theirs)
        if pending is not None and pending.sequence == mine.sequence:
            _note(check, _compare(mine, pending))
            check.destination.add(pending)
            pending = await _next(theirs)
        else:
            _note(check, _compare(mine, None))
    while pending is not None:
        _note(check, _compare(None, pending))
        check.destination.add(pending)
        pending = await _next(theirs)
    return check


def _note(check: ChannelCheck, difference: str) -> None:
    if difference and len(check.differences) < MAX_DIFFERENCES:
        check.differences.append(difference)
    elif difference and len(check.differences) == MAX_DIFFERENCES:
        check.differences.append("(more differences not listed)")


async def _next(messages: AsyncIterator[Message] | None) -> Message | None:
    if messages is None:
        return None
    try:
        message: Message = await anext(messages)
    except StopAsyncIteration:
        return None
    return message
