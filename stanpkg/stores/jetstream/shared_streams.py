"""The shared streams of a cluster: their names and subjects (``layout``'s), their
creation or check, and reading one of them whole, message by message for each channel.

A cluster keeps its channels in ``count`` streams, 0..count-1 (``cluster.channel_streams``,
or more when channels recorded in a stream past it exist: a channel never moves). They are
created, or checked, once at promotion; creating a channel creates none. Each is one Raft
group, so what a cluster costs JetStream while idle, and how many elections the death of
the serving node brings, depends on this count, not on the number of channels.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import NamedTuple

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import API_TIMEOUT
from stanpkg.stores.jetstream.layout import (
    channel_stream_index,
    channel_subject,
    shared_stream_name,
    shared_stream_prefix,
)
from stanpkg.stores.jetstream.record_codec import ChannelMessage, decode_messages
from stanpkg.stores.jetstream.stream_management import ensure_stream, shared_stream_config
from stanpkg.stores.jetstream.stream_reader import StreamState, read_range
from stanpkg.transport.connection import NatsConnection, decode_headers

__all__ = ["ATOMIC_BATCHES_NEEDED", "SharedStreams", "StoredMessage", "UnsupportedServer"]

ATOMIC_BATCHES_NEEDED = "2.12"  # the first nats-server release with atomic batches


class UnsupportedServer(StoreError):
    """The JetStream server cannot keep the layout (no atomic batches): promotion stops
    instead of waiting."""


class StoredMessage(NamedTuple):
    """A message of a shared stream, read for its channel: where it is in the stream
    and what it holds."""

    stream_seq: int
    message: ChannelMessage


class SharedStreams:
    """The ``count`` shared streams of one cluster."""

    def __init__(
        self, conn: NatsConnection, cluster_id: str, replicas: int, count: int, *, new: int = 0
    ) -> None:
        """``count``: streams 0..count-1 exist (every channel recorded is in one of them);
        ``new``: how many of them new channels are spread over (``count`` when 0)."""
        self._conn = conn
        self.cluster_id = cluster_id
        self.replicas = replicas
        self.count = count
        self.new = new or count

    def name(self, index: int) -> str:
        return shared_stream_name(self.cluster_id, index)

    def names(self) -> list[str]:
        return [self.name(index) for index in range(self.count)]

    def subject(self, index: int, channel: str) -> str:
        return channel_subject(self.cluster_id, index, channel)

    def index_of_new(self, channel: str) -> int:
        """The stream a new channel goes to."""
        return channel_stream_index(channel, self.new)

    async def ensure(self, index: int, leader_timeout: float = API_TIMEOUT) -> StreamState:
        """Create stream ``index``, or check and bring an existing one's settings up to
        date; its state, as its leader has it (``leader_timeout``: how long it is asked
        while it elects). UnsupportedServer when JetStream keeps no atomic batches."""
        config = shared_stream_config(self.cluster_id, index, replicas=self.replicas)
        try:
            state = await ensure_stream(self._conn, config, leader_timeout=leader_timeout)
        except StoreError as exc:
            raise StoreError(f"unable to create stream {config['name']}: {exc}") from exc
        if not state.atomic:
            version = self._conn.server_info.get("version", "?")
            raise UnsupportedServer(
                f"stream {config['name']} does not take atomic batches: clustered mode needs "
                f"nats-server {ATOMIC_BATCHES_NEEDED} or later (the server is {version})"
            )
        return state

    async def read(
        self, index: int, state: StreamState, channels: set[str]
    ) -> AsyncIterator[tuple[str, StoredMessage]]:
        """Every message of stream ``index`` (``state``: its leader's, from
        :meth:`ensure`) that belongs to one of ``channels``, in stream order, with its
        channel: one pass over the whole stream, however many channels it holds.
        Messages of other subjects (a channel without a record) are skipped."""
        prefix = shared_stream_prefix(self.cluster_id, index)
        cut = len(prefix)
        async for stream_seq, headers, data in read_range(
            self._conn, self.name(index), state.first_seq, state.last_seq
        ):
            fields = decode_headers(headers)[1]
            subject = fields.get("Nats-Subject", "")
            channel = subject[cut:]
            if not subject.startswith(prefix) or channel not in channels:
                continue
            for message in decode_messages(channel, fields, data):
                yield channel, StoredMessage(stream_seq, message)
