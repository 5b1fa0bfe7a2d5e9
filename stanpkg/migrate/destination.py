"""The destination: a JetStream in the layout of stanpkg's clustered mode, written through
the serving node's own writer (``ClusterWriter``): a ``ChannelLog`` per channel in its
shared stream (each message with its STAN sequence, each write expecting where the
channel's last one is, so nothing is ever stored twice) and the ``ReplicatedMap`` of
server info, clients, channels, their figures and subscriptions.

A channel goes to the shared stream its record names when the cluster has it, else to
the one the cluster's ``layout`` record spreads new channels over (the default number of
streams for a cluster that has none yet). A cluster still in layout 1 (a stream per
channel, from an earlier release) is refused: its nodes convert it when they start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from enum import Enum

from stanpkg.migrate.handover import hand_over
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ClientRecord, RecoveredSubscription, ServerInfo, StoreError
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.cluster_writer import ClusterWriter
from stanpkg.stores.jetstream.connection import connect, js_api, wait_ready
from stanpkg.stores.jetstream.layout import (
    DEFAULT_CHANNEL_STREAMS,
    LAYOUT_KEY,
    channel_stream_index,
    kv_stream,
    records_bucket,
)
from stanpkg.stores.jetstream.record_codec import (
    ChannelState,
    channel_record,
    client_record,
    decode_channels,
    decode_layout,
    decode_messages,
    decode_states,
    decode_stream_messages,
    layout_record,
    server_record,
    state_record,
    subscription_channel,
    subscription_record,
)
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.settings import MAX_REPLICAS
from stanpkg.stores.jetstream.stream_reader import (
    ReplicaBehind,
    StreamState,
    find_stream_state,
    last_of_subject,
    read_subject,
)
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.nuid import next_nuid

__all__ = ["ChannelPlan", "Destination", "DestinationError", "Message", "Step"]

READY_TIMEOUT = 30.0  # for JetStream to answer (a cluster electing its meta leader)
STATE_RETRY_INTERVAL = 0.25  # reading the records again while this replica catches up
ALL = 2**63 - 1  # a stream sequence past every message


class DestinationError(Exception):
    """The destination refused the migration (or cannot be reached)."""


class Step(Enum):
    CREATE = "create"  # nothing of the channel yet
    RESUME = "resume"  # holding the source's first messages: continue after them
    DONE = "done"  # holds every message already
    CONFLICT = "conflict"  # holds another channel of the same name


@dataclass(frozen=True)
class ChannelPlan:
    """What migrating one channel does: ``next_seq`` is the first sequence to write;
    ``stream``: what the destination holds of the channel (None: nothing)."""

    step: Step
    next_seq: int
    stream: StreamState | None
    reason: str = ""


@dataclass(frozen=True)
class Message:
    """A message as compared on both sides."""

    sequence: int
    reply: str
    timestamp: int
    data: bytes


class Destination:
    """One migration's connection to the destination JetStream."""

    def __init__(self, conn: NatsConnection, cluster_id: str, replicas: int) -> None:
        self._conn = conn
        self.cluster_id = cluster_id
        self.replicas = replicas
        self.bucket = records_bucket(cluster_id)  # the cluster's records
        self._state: ReplicatedMap | None = None
        self._channels: dict[str, int | None] = {}  # the cluster's channels and streams
        self._states: dict[str, ChannelState] = {}
        self._has_layout = False
        # The layout of a cluster without records, until _read_layout reads the records.
        self._writer = ClusterWriter(
            conn, cluster_id, replicas, recorded=(), new_streams=DEFAULT_CHANNEL_STREAMS,
            writer_id=f"migrate-{next_nuid()}",
        )  # fmt: skip
        self._ensured: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls, endpoint: NatsEndpoint, cluster_id: str, replicas: int | None
    ) -> Destination:
        try:
            conn = await connect(endpoint, name="stanpkg-migrate")
        except StoreError as exc:
            raise DestinationError(str(exc)) from exc
        try:
            await wait_ready(conn, READY_TIMEOUT)
        except StoreError as exc:
            await conn.close()
            raise DestinationError(f"unable to use JetStream at {endpoint.url}: {exc}") from exc
        destination = cls(conn, cluster_id, replicas or 1)
        try:
            if replicas is None:
                destination.replicas = await destination._default_replicas()
            await destination._read_layout()
        except BaseException:
            await conn.close()
            raise
        return destination

    async def _default_replicas(self) -> int:
        """The cluster's own choice when its state exists (its records bucket's replicas),
        else one per JetStream server the connection knows of, at most MAX_REPLICAS."""
        try:
            answer = await js_api(self._conn, f"STREAM.INFO.{kv_stream(self.bucket)}", None)
        except StoreError:
            answer = {}
        config = answer.get("config")
        if "error" not in answer and isinstance(config, dict):
            return int(config.get("num_replicas") or 1)
        # No bucket yet (or unreadable): count the servers, configured and announced.
        return max(1, min(len(set(self._conn.known_servers)), MAX_REPLICAS))

    async def _read_layout(self) -> None:
        """The cluster's channels, their streams and figures, and how many streams new
        channels are spread over, from its records if it has any (read only: a dry run
        writes nothing). DestinationError for a cluster still in layout 1."""
        try:
            exists = await find_stream_state(self._conn, kv_stream(self.bucket)) is not None
            records = await self._load(ReplicatedMap(self._conn, self.bucket)) if exists else {}
            layout = decode_layout(records.get(LAYOUT_KEY))
            self._channels = decode_channels(records)
            self._states = decode_states(records)
        except StoreError as exc:
            raise DestinationError(str(exc)) from exc
        legacy = [name for name, index in self._channels.items() if index is None]
        if legacy and layout is None:
            raise DestinationError(
                f"the cluster {self.cluster_id!r} keeps each channel in a stream of its own "
                f"(the layout of earlier releases; {len(legacy)} channel(s), "
                f"{legacy[0]!r} first): start its nodes with this release once, which "
                "converts it, then migrate"
            )
        self._has_layout = layout is not None
        new = layout.channel_streams if layout is not None else DEFAULT_CHANNEL_STREAMS
        recorded = [index for index in self._channels.values() if index is not None]
        self._writer = ClusterWriter(
            self._conn, self.cluster_id, self.replicas,
            recorded=recorded, new_streams=new, writer_id=self._writer.writer_id,
        )  # fmt: skip

    async def close(self) -> None:
        await self._conn.close()

    # -- channels ------------------------------------------------------------------------

    def index_of(self, channel: str) -> int:
        """The shared stream of ``channel``: its record's, else a new channel's."""
        index = self._channels.get(channel)
        return (
            index if index is not None else channel_stream_index(channel, self._writer.streams.new)
        )

    def channel_log(self, channel: str) -> ChannelLog:
        return self._writer.channel_log(channel, self.index_of(channel))

    async def plan_channel(self, channel: str, first_seq: int, last_seq: int) -> ChannelPlan:
        """What to do for a channel whose source holds ``first_seq..last_seq``, judged by
        what the destination holds of it (the caller compares the messages at its
        bounds)."""
        state = await self.channel_state(channel)
        start = max(first_seq, 1)
        if state is None:
            return ChannelPlan(Step.CREATE, start, None)
        if state.msgs == 0:
            if state.last_seq == start - 1:
                return ChannelPlan(Step.RESUME if start <= last_seq else Step.DONE, start, state)
            if state.last_seq < start - 1:
                return ChannelPlan(
                    Step.RESUME, start, state, "empty channel continued at the first sequence"
                )
            return ChannelPlan(
                Step.CONFLICT,
                start,
                state,
                f"the channel is empty at sequence {state.last_seq}, past the channel's "
                f"first sequence {start}",
            )
        if state.first_seq != start or state.last_seq > last_seq:
            return ChannelPlan(
                Step.CONFLICT,
                start,
                state,
                f"the destination holds {state.first_seq}..{state.last_seq}, the source "
                f"{first_seq}..{last_seq}",
            )
        return ChannelPlan(
            Step.RESUME if state.last_seq < last_seq else Step.DONE, state.last_seq + 1, state
        )

    async def channel_state(self, channel: str) -> StreamState | None:
        """What the destination holds of ``channel``: its first and last sequence and
        message count (its figures' record when no message is left); None for nothing."""
        log = self.channel_log(channel)
        try:
            if await find_stream_state(self._conn, log.stream) is None:
                return None  # its stream does not exist yet
            last = await log.last_message()
            if last is None:
                figures = self._states.get(channel)
                if figures is None:
                    return None if channel not in self._channels else StreamState(0, 0, 0, 0)
                return StreamState(figures.last + 1, figures.last, 0, 0)
            first = await self._first(log, last.stream_seq)
        except StoreError as exc:
            raise DestinationError(f"channel {channel!r}: {exc}") from exc
        return StreamState(first, last.sequence, last.sequence - first + 1, 0)

    async def _first(self, log: ChannelLog, last_stream_seq: int) -> int:
        async with contextlib.aclosing(
            read_subject(self._conn, log.stream, log.subject, 1, last_stream_seq, batch=1)
        ) as found:
            async for _, headers, data in found:
                return decode_stream_messages(log.channel, headers, data)[0].sequence
        raise StoreError(f"no first message of {log.subject} in stream {log.stream}")

    async def stored_message(self, channel: str, sequence: int) -> Message | None:
        log = self.channel_log(channel)
        last = await last_of_subject(self._conn, log.stream, log.subject)
        if last is not None:
            for stored in decode_messages(channel, last.headers, last.data):
                if stored.sequence == sequence:
                    record = pb.MsgProto.FromString(stored.record)
                    return Message(record.sequence, record.reply, record.timestamp, record.data)
        async with contextlib.aclosing(self.read_messages(channel, sequence, sequence)) as found:
            async for message in found:
                return message
        return None

    async def read_messages(
        self, channel: str, first: int, last: int
    ) -> AsyncGenerator[Message, None]:
        """The channel's messages first..last, from its subject of its shared stream."""
        log = self.channel_log(channel)
        newest = await last_of_subject(self._conn, log.stream, log.subject)
        if newest is None:
            return
        async for _, headers, data in read_subject(
            self._conn, log.stream, log.subject, 1, newest.stream_seq
        ):
            for message in decode_stream_messages(channel, headers, data):
                if message.sequence > last:
                    return
                if message.sequence >= first:
                    record = pb.MsgProto.FromString(message.record)
                    yield Message(record.sequence, record.reply, record.timestamp, record.data)

    async def prepare(
        self, log: ChannelLog, plan: ChannelPlan, *, replace: bool, first_seq: int
    ) -> int:
        """Make the shared streams exist, clear another channel of the same name when
        asked to; the first sequence to write (``first_seq``, the source channel's first,
        after a clearing)."""
        try:
            await self._ensure_streams()
            if plan.step is Step.CONFLICT:
                if not replace:
                    raise DestinationError(
                        f"channel {log.channel!r}: the destination holds a different "
                        f"channel of that name ({plan.reason}); --replace deletes it"
                    )
                await log.purge_below(ALL)
                self._states.pop(log.channel, None)
                log.start_at(None)
                return max(first_seq, 1)
            last = await log.last_message()
        except StoreError as exc:
            raise DestinationError(f"channel {log.channel!r}: {exc}") from exc
        log.start_at(last)
        return last.sequence + 1 if last is not None else plan.next_seq

    async def _ensure_streams(self) -> None:
        """Every shared stream created (or checked), once for all the channels."""
        if self._ensured is None:
            self._ensured = asyncio.ensure_future(self._ensure_all())
        await asyncio.shield(self._ensured)

    async def _ensure_all(self) -> None:
        for index in range(self._writer.streams.count):
            await self._writer.streams.ensure(index)

    # -- records -------------------------------------------------------------------------

    async def open_state(self) -> dict[str, bytes]:
        """The cluster's records as they are (creating the bucket if missing)."""
        try:
            self._state = await ReplicatedMap.open(self._conn, self.bucket, replicas=self.replicas)
            return await self._load(self._state)
        except StoreError as exc:
            raise DestinationError(str(exc)) from exc

    async def _load(self, state: ReplicatedMap) -> dict[str, bytes]:
        # A cluster that has just started, or a node that has just rejoined, may answer
        # from a replica still applying its leader's writes: read again for a while.
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT
        while True:
            try:
                return await state.load()
            except ReplicaBehind:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                await asyncio.sleep(STATE_RETRY_INTERVAL)

    async def hand_over(self, channels: list[str]) -> tuple[bool, str]:
        """Tell the serving node, if one runs, to serve ``channels`` (handover.py)."""
        return await hand_over(self._conn, self.cluster_id, channels)

    async def write_records(
        self,
        existing: dict[str, bytes],
        info: ServerInfo,
        clients: tuple[ClientRecord, ...],
        channels: dict[str, tuple[RecoveredSubscription, ...]],
        figures: dict[str, ChannelState],
    ) -> int:
        """The channels' records (their stream, their figures) and the clients', then the
        server info (the cluster loads a state only once it has one); the channels' other
        subscriptions removed. The number of records written."""
        state = self._state
        assert state is not None
        for key in existing:
            if subscription_channel(key) in channels:
                state.delete(key)  # replaced by the source's below, if it has that ID
        written = 0
        if LAYOUT_KEY not in existing:
            state.put(*layout_record(self._writer.streams.new, packs=self._writer.pack_bytes > 0))
            written += 1
        for channel, subs in channels.items():
            index, channel_figures = self.index_of(channel), figures.get(channel, ChannelState())
            state.put(*channel_record(channel, index))
            state.put(*state_record(channel, channel_figures))
            self._channels[channel], self._states[channel] = index, channel_figures
            for sub in subs:
                state.put(*subscription_record(channel, sub.record, sub.pending))
                written += 1
            written += 2
        for client in clients:
            state.put(*client_record(client))
            written += 1
        try:
            await state.flush()
            state.put(*server_record(info))
            await state.flush()
        except StoreError as exc:
            raise DestinationError(str(exc)) from exc
        return written + 1
