"""The destination: a JetStream in the layout of stanpkg's clustered mode, written with the
clustered store's own parts — a ``ChannelStream`` per channel (STAN sequence = stream
sequence, each write expecting its predecessor, so nothing is ever stored twice) and the
``ReplicatedMap`` of server info, clients, channels and subscriptions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from enum import Enum

from stanpkg.plan.limits import Limits
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ClientRecord, RecoveredSubscription, ServerInfo, StoreError
from stanpkg.stores.jetstream.channel_streams import ChannelStream
from stanpkg.stores.jetstream.jetstream_api import connect, js_api, wait_ready
from stanpkg.stores.jetstream.kvmap import ReplicatedMap
from stanpkg.stores.jetstream.layout import kv_stream, records_bucket, stream_name
from stanpkg.stores.jetstream.records import (
    channel_record,
    client_record,
    from_stream_message,
    server_record,
    subscription_channel,
    subscription_record,
)
from stanpkg.stores.jetstream.store import MAX_REPLICAS
from stanpkg.stores.jetstream.stream_management import purge_stream_to
from stanpkg.stores.jetstream.stream_reader import (
    ReplicaBehind,
    StreamState,
    find_stream_state,
    read_range,
)
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.nuid import next_nuid

__all__ = ["ChannelPlan", "Destination", "DestinationError", "Step", "migrated_id"]

READY_TIMEOUT = 30.0  # for JetStream to answer (a cluster electing its meta leader)
STATE_RETRY_INTERVAL = 0.25  # reading the records again while this replica catches up


class DestinationError(Exception):
    """The destination refused the migration (or cannot be reached)."""


class Step(Enum):
    CREATE = "create"  # no stream yet
    RESUME = "resume"  # a stream holding the source's first messages: continue after them
    DONE = "done"  # holds every message already
    CONFLICT = "conflict"  # holds another channel of the same name


@dataclass(frozen=True)
class ChannelPlan:
    """What migrating one channel does: ``next_seq`` is the first sequence to write."""

    step: Step
    next_seq: int
    stream: StreamState | None
    reason: str = ""


def migrated_id(sequence: int) -> str:
    """The Nats-Msg-Id of a migrated message (a publish ID of its own kind: never a NUID)."""
    return f"stan-migrate-{sequence}"


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
        self._writer_id = f"migrate-{next_nuid()}"

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
        if replicas is None:
            destination.replicas = await destination._default_replicas()
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

    async def close(self) -> None:
        await self._conn.close()

    # -- channels ------------------------------------------------------------------------

    def stream(self, channel: str, limits: Limits, first_seq: int) -> ChannelStream:
        stream = ChannelStream(
            self._conn,
            self.cluster_id,
            channel,
            limits,
            self.replicas,
            first_seq=max(first_seq, 1),
        )
        stream.writer_id = self._writer_id
        return stream

    async def plan_channel(self, channel: str, first_seq: int, last_seq: int) -> ChannelPlan:
        """What to do for a channel whose source holds ``first_seq..last_seq``, judged by
        the stream's bounds (the caller compares the messages at those bounds)."""
        state = await find_stream_state(self._conn, stream_name(self.cluster_id, channel))
        start = max(first_seq, 1)
        if state is None:
            return ChannelPlan(Step.CREATE, start, None)
        if state.msgs == 0:
            if state.last_seq == start - 1:
                return ChannelPlan(Step.RESUME if start <= last_seq else Step.DONE, start, state)
            if state.last_seq < start - 1:
                return ChannelPlan(
                    Step.RESUME, start, state, "empty stream moved to the first sequence"
                )
            return ChannelPlan(
                Step.CONFLICT,
                start,
                state,
                f"the stream is empty at sequence {state.last_seq}, past the channel's "
                f"first sequence {start}",
            )
        if state.first_seq != start or state.last_seq > last_seq:
            return ChannelPlan(
                Step.CONFLICT,
                start,
                state,
                f"the stream holds {state.first_seq}..{state.last_seq}, the source "
                f"{first_seq}..{last_seq}",
            )
        return ChannelPlan(
            Step.RESUME if state.last_seq < last_seq else Step.DONE, state.last_seq + 1, state
        )

    async def stored_message(self, channel: str, sequence: int) -> Message | None:
        async with contextlib.aclosing(self.read_messages(channel, sequence, sequence)) as found:
            async for message in found:
                return message
        return None

    async def read_messages(
        self, channel: str, first: int, last: int
    ) -> AsyncGenerator[Message, None]:
        """The stream's messages first..last."""
        name = stream_name(self.cluster_id, channel)
        async for seq, headers, data in read_range(self._conn, name, first, last):
            record = pb.MsgProto.FromString(
                from_stream_message(seq, headers, data, channel=channel)
            )
            yield Message(record.sequence, record.reply, record.timestamp, record.data)

    async def stream_state(self, channel: str) -> StreamState | None:
        return await find_stream_state(self._conn, stream_name(self.cluster_id, channel))

    async def prepare(self, stream: ChannelStream, plan: ChannelPlan, *, replace: bool) -> int:
        """Create or reuse the channel's stream; the first sequence to write."""
        try:
            if plan.step is Step.CONFLICT:
                if not replace:
                    raise DestinationError(
                        f"channel {stream.channel!r}: the destination holds a different "
                        f"channel of that name ({plan.reason}); --replace deletes it"
                    )
                await stream.delete()
            elif plan.stream is not None and plan.stream.last_seq < plan.next_seq - 1:
                # an empty stream behind the channel's first sequence (created elsewhere)
                await purge_stream_to(self._conn, stream.name, plan.next_seq)
            await stream.ensure()
            state = await find_stream_state(self._conn, stream.name)
        except StoreError as exc:
            raise DestinationError(f"channel {stream.channel!r}: {exc}") from exc
        assert state is not None
        stream.last_sequence = state.last_seq
        return state.last_seq + 1

    # -- records -------------------------------------------------------------------------

    async def open_state(self) -> dict[str, bytes]:
        """The cluster's records as they are (creating the bucket if missing)."""
        try:
            self._state = await ReplicatedMap.open(self._conn, self.bucket, replicas=self.replicas)
            return await self._load_state()
        except StoreError as exc:
            raise DestinationError(str(exc)) from exc

    async def _load_state(self) -> dict[str, bytes]:
        # A cluster that has just started, or a node that has just rejoined, may answer
        # from a replica still applying its leader's writes: read again for a while.
        assert self._state is not None
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT
        while True:
            try:
                return await self._state.load()
            except ReplicaBehind:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
                await asyncio.sleep(STATE_RETRY_INTERVAL)

    async def write_records(
        self,
        existing: dict[str, bytes],
        info: ServerInfo,
        clients: tuple[ClientRecord, ...],
        channels: dict[str, tuple[RecoveredSubscription, ...]],
    ) -> int:
        """The channels' and clients' records, then the server info (the cluster loads
        a state only once it has one); the channels' other subscriptions removed. The
        number of records written."""
        state = self._state
        assert state is not None
        for key in existing:
            if subscription_channel(key) in channels:
                state.delete(key)  # replaced by the source's below, if it has that ID
        written = 0
        for channel, subs in channels.items():
            state.put(*channel_record(channel))
            for sub in subs:
                state.put(*subscription_record(channel, sub.record, sub.pending))
                written += 1
            written += 1
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
