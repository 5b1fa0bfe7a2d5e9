"""The clustered store: every replicated fact in JetStream, served from the leader's memory.

* Each channel is one stream (``streams.py``): STAN sequence = stream sequence, written
  pipelined with ``Nats-Expected-Last-Sequence`` so that only the lease holder, in order,
  can append (a stale leader is fenced by JetStream itself).
* Server info, clients, channels and subscriptions (with their pending sequences) are
  records of one replicated map (``kvmap.py``), written in batches.
* One node serves: the holder of the lease (``lease.py``). The others stand by; the one
  that takes the lease over loads the whole state — records and messages — into a
  :class:`MemoryStore` and serves from it, as the reference's leader serves from its
  local store.

Before this node holds the lease it knows nothing: ``recover`` returns None and writes are
refused, so a follower never touches the cluster's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import (
    ChannelStore,
    ClientRecord,
    MessageStore,
    RecoveredChannel,
    RecoveredState,
    RecoveredSubscription,
    ServerInfo,
    StandbyState,
    Store,
    StoreError,
    StoreLog,
    SubRecord,
    SubscriptionStore,
)
from stanpkg.stores.jetstream.channel_streams import (
    DUPLICATE_WINDOW,
    ChannelStream,
    Sent,
    StreamFenced,
    Writes,
)
from stanpkg.stores.jetstream.keys import kv_key, kv_key_parts
from stanpkg.stores.jetstream.kvmap import ReplicatedMap
from stanpkg.stores.jetstream.leadership import LeaderGathering
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.link import REQUEST_TIMEOUT, JetStreamLink, raise_if_cancelled
from stanpkg.stores.jetstream.standby_view import StandbyRefresher, read_standby_state
from stanpkg.stores.jetstream.streams import remove_stream_peer, stream_replicas
from stanpkg.stores.memory import MemoryMessageStore, MemoryStore
from stanpkg.stores.records import (
    client_from_proto,
    client_to_proto,
    server_info_from_proto,
    server_info_to_proto,
    sub_from_proto,
    sub_to_proto,
)
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.errors import NatsError
from stanpkg.transport.nuid import next_nuid

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["ClusterSettings", "ClusteredStore"]

MAX_REPLICAS = 5  # JetStream's limit
LAZY_STATE_INTERVAL = 1.0  # sent/acked sequences are replicated lazily, as the reference
PEERS_TIMEOUT = 60.0  # until JetStream has the quorum the replicas need
PROMOTION_TIMEOUT = 60.0  # to load the state once the lease is held
RETRY_INTERVAL = 0.5
LEADER_PROBE_TIMEOUT = 0.5  # the first wait for the records' stream leader at promotion
LEADER_PROBE_RETRY = 0.1
SERVER_KEY = kv_key("server")


@dataclass(frozen=True)
class ClusterSettings:
    """What the clustered store takes from the plan (resolved by the node)."""

    cluster_id: str
    node_id: str
    peers: tuple[str, ...]
    replicas: int
    lease_ttl: float  # seconds without renewal after which a standby takes over

    @classmethod
    def from_plan(cls, plan: Plan) -> ClusterSettings:
        cluster = plan.cluster
        return cls(
            cluster_id=plan.cluster_id,
            node_id=cluster.node_id,
            peers=cluster.peers,
            replicas=max(1, min(1 + len(cluster.peers), MAX_REPLICAS)),
            # Twice the reference's election timeout (4 s by default): JetStream's own
            # elections of the lease bucket's leader take 1-2 s, which a holder must ride
            # out without losing the lease.
            lease_ttl=max(2 * cluster.raft_election_timeout, cluster.raft_lease_timeout) / 1e9,
        )

    @property
    def bucket(self) -> str:
        """The KV bucket of the cluster's records (the lease's is this + ``_lease``)."""
        cluster_id = self.cluster_id
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in cluster_id)
        if safe != cluster_id or len(safe) > 60:
            # "a.b" and "a_b" read alike: a hash of the exact ID keeps their state apart.
            safe = f"{safe[:48]}_{hashlib.sha256(cluster_id.encode()).hexdigest()[:10]}"
        return f"STAN_{safe}_state"


class ClusteredStore(Store):
    type_name = "RAFT"
    pipelines_writes = True

    def __init__(self, plan: Plan, log: StoreLog, settings: ClusterSettings) -> None:
        self.plan = plan
        self.log = log
        self.settings = settings
        self._cache = MemoryStore(plan.store_limits, log)
        self._channels: dict[str, ChannelStore] = {}
        self._leading = False
        self._loaded: RecoveredState | None = None
        self._link: JetStreamLink | None = None  # KV, the lease
        self._conn: NatsConnection | None = None  # the channels' streams (the hot path)
        self._state: ReplicatedMap | None = None
        self._lease: Lease | None = None
        self._on_lost: Callable[[str], None] | None = None
        self._lazy: asyncio.Task[None] | None = None
        self._pending_flush: asyncio.Task[None] | None = None
        # Channels deleted here whose streams are being (or could not be) deleted.
        self._deletions: dict[str, asyncio.Task[bool]] = {}
        self._closing = False
        self._writer_id = ""
        self._standby: StandbyRefresher | None = None  # monitoring while standing by
        self._gathering: LeaderGathering | None = None  # stream leaders onto this node

    # -- connecting and leading -------------------------------------------------------

    async def connect(self, endpoint: NatsEndpoint) -> None:
        name = f"_NSS-{self.settings.cluster_id}-{self.settings.node_id}-cluster"
        self._link = await JetStreamLink.open(endpoint, name=name)
        try:
            self._conn = await NatsConnection.open(
                endpoint,
                name=f"{name}-streams",
                max_reconnect=-1,  # a cluster restarting is no reason to give up
                reconnect_wait=RETRY_INTERVAL,
            )
        except (NatsError, OSError) as exc:
            await self._link.close()
            raise StoreError(f"unable to connect to {endpoint.url}: {exc}") from exc

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        """Returns once this node holds the cluster's lease and has loaded the state."""
        settings = self.settings
        self._on_lost = on_lost
        self._state = await self._open_state()
        self._state.fence = self._check_lease
        self._lease = Lease(
            self._require_link(),
            bucket=settings.bucket + "_lease",
            key="leader",
            holder=settings.node_id,
            ttl=settings.lease_ttl,
            replicas=settings.replicas,
            on_lost=self._lost,
        )
        self._standby = StandbyRefresher(self._read_standby_state, self.log)
        self._standby.start()
        try:
            await self._lease.wait_until_held()
        finally:
            self._standby.stop()  # the leader serves from its own state: no reading
        self._writer_id = next_nuid()  # this leadership's writes
        self._leading = True
        try:
            self._loaded = await self._load_patiently()
        except BaseException:
            self._leading = False
            raise
        self._lazy = asyncio.get_running_loop().create_task(self._replicate_lazily())
        if settings.replicas > 1:
            bucket = settings.bucket  # the channels' streams move at their first write
            records = [f"KV_{bucket}_lease", f"KV_{bucket}"]
            self._gathering = LeaderGathering(self._require_conn(), lambda: records, self.log)
            self._gathering.start()
        return True

    async def _settle_leader(self, stream: str) -> None:
        if self._gathering is not None:
            await self._gathering.lead_here(stream)

    def _stream_names(self) -> list[str]:
        """Every stream of the cluster: the records, the lease, each channel's."""
        bucket = self.settings.bucket
        streams = [f"KV_{bucket}_lease", f"KV_{bucket}"]
        for channel in self._channels.values():
            msgs = channel.msgs
            assert isinstance(msgs, ReplicatedMessages)
            streams.append(msgs.stream.name)
        return streams

    async def _open_state(self) -> ReplicatedMap:
        """The cluster's records, once JetStream can keep them with every replica: that
        needs a quorum of the peers (and routes to them)."""
        link, settings = self._require_link(), self.settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PEERS_TIMEOUT
        while True:
            try:
                await link.wait_ready(max(0.0, deadline - loop.time()))
                return await ReplicatedMap.open(
                    link, settings.bucket, replicas=settings.replicas, reader=self._require_conn()
                )
            except StoreError as exc:
                raise_if_cancelled()
                if loop.time() >= deadline:
                    waiting = ", ".join(settings.peers) or "none configured"
                    raise StoreError(
                        f"the cluster did not form within {PEERS_TIMEOUT:.0f} s "
                        f"(peers: {waiting}; {settings.replicas} replicas wanted): {exc}"
                    ) from exc
            await asyncio.sleep(RETRY_INTERVAL)

    def _check_lease(self) -> None:
        """Records are written only under a fresh lease: they are not fenced by JetStream
        as the channels' writes are (expected last sequence), so a node paused past its
        lease could otherwise overwrite the records of the node that took over."""
        lease = self._lease
        if lease is None or not lease.fresh:
            raise StoreError("this node's lease on the cluster is not current: not writing")

    def _lost(self, reason: str) -> None:
        self._leading = False
        if self._on_lost is not None:
            self._on_lost(f"cluster lease lost: {reason}")

    def _require_link(self) -> JetStreamLink:
        if self._link is None:
            raise StoreError("the clustered store is not connected")
        return self._link

    def _require_conn(self) -> NatsConnection:
        if self._conn is None:
            raise StoreError("the clustered store is not connected")
        return self._conn

    def _require_leading(self) -> ReplicatedMap:
        if not self._leading or self._state is None:
            raise StoreError("this node does not lead the cluster")
        return self._state

    async def remove_cluster_node(self, node_id: str) -> None:
        """Move the replicas node ``node_id`` holds (channels, records, the lease) to the
        cluster's other JetStream servers: JetStream needs a server without a replica of
        each stream to move it to, so the replacement node is started first."""
        self._require_leading()
        conn = self._require_conn()
        for stream in self._stream_names():
            if node_id in await stream_replicas(conn, stream):
                await remove_stream_peer(conn, stream, node_id)

    # -- loading (promotion) ------------------------------------------------------------

    async def _load_patiently(self) -> RecoveredState | None:
        """Load, waiting while JetStream elects leaders for the streams the dead node led
        (seconds), for PROMOTION_TIMEOUT at most; the lease is renewed meanwhile. The
        records come first, then the channels; a channel whose stream still elects is
        asked again on its own, and what was loaded before it is not loaded again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PROMOTION_TIMEOUT
        # A stream electing is asked briefly and again, not once for a whole request
        # timeout (a new leader does not answer a request sent before it was elected); a
        # loaded host gets longer each time.
        leader_timeout = LEADER_PROBE_TIMEOUT
        while True:
            try:
                records = await self._require_leading().load(leader_timeout)
                break
            except StoreError as exc:
                self._check_promotion(exc, deadline)
                self.log.warn(f"Loading the cluster's state, retrying: {exc}")
            leader_timeout = min(leader_timeout + LEADER_PROBE_TIMEOUT, REQUEST_TIMEOUT)
            await asyncio.sleep(LEADER_PROBE_RETRY)
        return await self._restore(records, deadline, leader_timeout)

    def _check_promotion(self, exc: StoreError, deadline: float) -> None:
        """Raise when a failed load must not be retried: cancelled, lease lost, too late."""
        raise_if_cancelled()
        if not self._leading:  # the lease lapsed meanwhile: another node leads
            raise StoreError(f"lost the cluster's lease while loading: {exc}") from exc
        if asyncio.get_running_loop().time() >= deadline:
            raise StoreError(f"unable to load the cluster's state: {exc}") from exc

    async def _restore(
        self, records: dict[str, bytes], deadline: float, leader_timeout: float
    ) -> RecoveredState | None:
        raw_info = records.pop(SERVER_KEY, None)
        if raw_info is None:
            return None
        info = server_info_from_proto(spb.ServerInfo.FromString(raw_info))
        self._cache.init(info)
        clients: list[ClientRecord] = []
        channel_names: list[str] = []
        subs: dict[str, list[spb.SubscriptionSnapshot]] = {}
        for key, value in records.items():
            kind, *rest = kv_key_parts(key)
            if kind == "client":
                record = client_from_proto(spb.ClientInfo.FromString(value))
                clients.append(record)
                self._cache.add_client(record)
            elif kind == "channel":
                channel_names.append(rest[0])
            elif kind == "sub":
                subs.setdefault(rest[0], []).append(spb.SubscriptionSnapshot.FromString(value))
        channels = []
        for name in sorted(channel_names):
            store = self._open_channel(name, new=False)
            # One channel at a time: the elections run side by side anyway, and asking
            # every channel's stream at once multiplies the requests JetStream gets while
            # it elects (measured: no faster, if anything slower, with 10 channels).
            leader_timeout = await self._load_messages(store, deadline, leader_timeout)
            recovered = RecoveredChannel(store)
            replicated = store.subs
            assert isinstance(replicated, ReplicatedSubscriptions)
            for snapshot in sorted(subs.get(name, ()), key=lambda s: s.State.ID):
                sub = sub_from_proto(snapshot.State)
                pending = sorted(snapshot.AcksPending)
                replicated.restore(sub, pending)
                recovered.subscriptions.append(RecoveredSubscription(sub, pending))
            channels.append(recovered)
        return RecoveredState(info, clients, channels)

    async def _load_messages(
        self, store: ChannelStore, deadline: float, leader_timeout: float
    ) -> float:
        """A channel's messages from its stream's leader, asked again while it elects;
        the leader timeout it ended with (the next channel starts from it)."""
        msgs = store.msgs
        assert isinstance(msgs, ReplicatedMessages)
        warned = False
        while True:
            try:
                first, last = await msgs.stream.ensure(leader_timeout)
                records: list[bytes] = []
                stamps: list[int] = []
                guids: list[str] = []
                async for record, guid in msgs.stream.read(first, last):
                    records.append(record)
                    stamps.append(pb.MsgProto.FromString(record).timestamp)
                    guids.append(guid)
                break
            except StoreError as exc:
                self._check_promotion(exc, deadline)
                if not warned:  # once a channel: several may wait for their elections
                    self.log.warn(f"Loading the cluster's state, waiting: {exc}")
                    warned = True
            leader_timeout = min(leader_timeout + LEADER_PROBE_TIMEOUT, REQUEST_TIMEOUT)
            await asyncio.sleep(LEADER_PROBE_RETRY)
        msgs.restore(first, last, records, stamps, guids)
        return leader_timeout

    # -- the Store interface --------------------------------------------------------------

    def standby_state(self) -> StandbyState | None:
        if self._leading or self._standby is None:
            return None
        return self._standby.latest

    async def _read_standby_state(self) -> StandbyState | None:
        assert self._state is not None
        return await read_standby_state(
            self._state,
            self._require_conn(),
            self.settings.cluster_id,
            asyncio.get_running_loop().time(),
        )

    def lock_holder_silent(self) -> bool:
        lease = self._lease
        return lease is not None and (lease.held or lease.holder_silent)

    def recover(self) -> RecoveredState | None:
        # A follower has no state; the leader returns what it loaded at promotion.
        if not self._leading:
            return None
        loaded, self._loaded = self._loaded, None
        return loaded

    def init(self, info: ServerInfo) -> None:
        if not self._leading:
            return  # the start-up "No recovered state" of a follower
        self._cache.init(info)
        self._put(SERVER_KEY, server_info_to_proto(info).SerializeToString())

    def add_client(self, record: ClientRecord) -> None:
        self._cache.add_client(record)
        self._put(kv_key("client", record.id), client_to_proto(record).SerializeToString())

    def delete_client(self, client_id: str) -> None:
        self._cache.delete_client(client_id)
        self._require_leading().delete(kv_key("client", client_id))
        self._schedule_flush()

    def create_channel(self, name: str) -> ChannelStore:
        return self._open_channel(name, new=True)

    def _open_channel(self, name: str, *, new: bool) -> ChannelStore:
        existing = self._channels.get(name)
        if existing is not None:
            return existing
        cached = self._cache.create_channel(name)  # max_channels
        msgs = cached.msgs
        assert isinstance(msgs, MemoryMessageStore)
        state = self._require_leading()
        settings = self.settings
        stream = ChannelStream(
            self._require_conn(), settings.cluster_id, name, cached.limits, settings.replicas
        )
        stream.writer_id = self._writer_id
        stream.settle_leader_of = self._settle_leader
        replicated = ReplicatedMessages(msgs, stream)
        replicated.fence = self._check_lease
        if new:
            replicated.prepare = lambda: self._prepare_new_channel(name, stream)
        channel = ChannelStore(
            name,
            replicated,
            ReplicatedSubscriptions(cached.subs, state, name),
            cached.limits,
        )
        self._channels[name] = channel
        if new:
            self._put(kv_key("channel", name), b"")
        return channel

    def delete_channel(self, name: str) -> None:
        channel = self._channels.pop(name, None)
        self._cache.delete_channel(name)
        if channel is None:
            return
        state = self._require_leading()
        subs = channel.subs
        assert isinstance(subs, ReplicatedSubscriptions)
        for sub_id in list(subs.tracked):
            state.delete(kv_key("sub", name, str(sub_id)))
        msgs = channel.msgs
        assert isinstance(msgs, ReplicatedMessages)
        deletion = asyncio.get_running_loop().create_task(
            self._delete_channel_stream(name, msgs.stream)
        )
        self._deletions[name] = deletion
        deletion.add_done_callback(lambda _: self._forget_deletion(name, deletion))
        self._schedule_flush()

    def _forget_deletion(self, name: str, deletion: asyncio.Task[bool]) -> None:
        """A deletion that succeeded needs no more waiting for; a failed one is kept."""
        if self._deletions.get(name) is deletion and not deletion.cancelled() and deletion.result():
            del self._deletions[name]

    async def _delete_channel_stream(self, name: str, stream: ChannelStream) -> bool:
        """The stream first, then the channel's record: a node that takes over in between
        finds the record without a stream and serves the channel empty. The other way
        round it would find a stream without a record, and a new channel of that name
        would be written after its old messages. The record stays when the channel was
        created again meanwhile (its first write waits for this) or the deletion failed
        (the next creation tries again, see _prepare_new_channel)."""
        try:
            await stream.delete()
        except Exception as exc:  # a background task: every failure is logged, none raised
            self.log.error(f"Unable to delete the stream of channel {name!r}: {exc}")
            return False
        if name not in self._channels and self._leading and self._state is not None:
            self._state.delete(kv_key("channel", name))
            self._schedule_flush()
        return True

    async def _prepare_new_channel(self, name: str, stream: ChannelStream) -> None:
        """Before a new channel's first write: its record on a quorum (the node that takes
        over learns the channels from the records), and the stream of a channel of that
        name deleted here gone (JetStream names the stream after the channel)."""
        await self.records_durable()
        deletion = self._deletions.get(name)
        if deletion is None or await asyncio.shield(deletion):
            return
        await stream.delete()  # once more; StoreError fails this write
        if self._deletions.get(name) is deletion:
            del self._deletions[name]

    def close(self) -> None:
        self._closing = True
        self._cache.close()
        self._channels.clear()
        if self._standby is not None:
            self._standby.stop()
        if self._gathering is not None:
            self._gathering.stop()
        for task in (self._lazy, self._pending_flush):
            if task is not None:
                task.cancel()
        if self._lease is not None or self._link is not None or self._conn is not None:
            self._spawn(self._shutdown())

    async def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            if self._leading and self._state is not None:
                await self._flush_lazy_state()
                await self._state.flush()
        if self._lease is not None:
            with contextlib.suppress(Exception):
                await self._lease.release()  # a standby takes over at once
        if self._link is not None:
            with contextlib.suppress(Exception):
                await self._link.close()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()

    # -- replication of records ---------------------------------------------------------

    def _put(self, key: str, value: bytes) -> None:
        self._require_leading().put(key, value)
        self._schedule_flush()

    async def records_durable(self) -> None:
        """Until every record queued so far is on a quorum (StoreError if it cannot be).

        A new channel's first message waits for it: acknowledged messages in a channel
        whose record did not survive the node's death would be invisible to the node
        that takes over (it learns the channels from the records). Seen in a test: the
        records' write went unanswered while their stream's leader moved to the new
        serving node, the channel's write did not, and the node died 0.1 s later."""
        while True:
            pending = self._pending_flush
            if pending is not None and not pending.done():
                await asyncio.shield(pending)  # it logs its failure and queues it again
            state = self._require_leading()
            if not state.queued:
                return
            await state.flush()

    def _schedule_flush(self) -> None:
        """Records (clients, channels) go out at once, in one batch per loop turn."""
        if self._pending_flush is None or self._pending_flush.done():
            self._pending_flush = self._spawn(self._flush_records())

    async def _flush_records(self) -> None:
        await asyncio.sleep(0)
        state = self._state
        if state is None:
            return
        try:
            await state.flush()
        except StoreError as exc:
            self.log.error(f"Unable to replicate the cluster state: {exc}")

    async def _replicate_lazily(self) -> None:
        while not self._closing:
            await asyncio.sleep(LAZY_STATE_INTERVAL)
            try:
                await self._flush_lazy_state()
            except StoreError as exc:
                self.log.error(f"Unable to replicate subscription positions: {exc}")

    async def _flush_lazy_state(self) -> None:
        for channel in list(self._channels.values()):
            subs = channel.subs
            assert isinstance(subs, ReplicatedSubscriptions)
            subs.write_changed()
        if self._state is not None:
            await self._state.flush()

    def _spawn(self, coro: object) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        return task


class ReplicatedMessages(MessageStore):
    """A channel's messages: appended to the channel's stream, then kept in memory and
    served from there. A batch enters memory only once the stream has it on a quorum;
    a batch that fails leaves no trace, and memory is then brought level with the stream
    (a write whose reply was lost may have been stored).

    Batches are pipelined: each is sent when its flush begins, ahead of the answers for
    the ones before it, and enters memory after them. One that fails fails the batches
    numbered after it too (their sequences counted on it)."""

    deduplicates = True

    def __init__(self, cache: MemoryMessageStore, stream: ChannelStream) -> None:
        self.cache = cache
        self.limits = cache.limits
        self.stream = stream
        self._stream_ready = False
        self._led_here = False  # the stream's leader was brought to this node's server
        # A new channel's: awaited before its first write (until it succeeds), then dropped.
        self.prepare: Callable[[], Awaitable[None]] | None = None
        # Raises StoreError when this node may no longer write (checked before each batch).
        self.fence: Callable[[], None] | None = None
        self._records: list[bytes] = []
        self._stamps: list[int] = []
        self._guids: list[str] = []
        self._in_flight = 0  # messages of batches being written
        self._in_flight_guids: set[str] = set()
        self._tail: asyncio.Task[None] | None = None  # the newest batch being written
        self._behind = False  # memory may lack messages the stream has
        self._recent = RecentGuids(DUPLICATE_WINDOW)

    def restore(
        self, first: int, last: int, records: list[bytes], stamps: list[int], guids: list[str]
    ) -> None:
        """The stream's content at promotion (contiguous: limits only drop the oldest)."""
        self._stream_ready = True
        self.stream.last_sequence = last
        self.cache.start_after(first - 1 if records else last)
        if records:
            self.cache.store(records, stamps)
            self._recent.add_stamped(guids, stamps)

    def has_guid(self, guid: str) -> bool:
        return guid in self._recent or guid in self._in_flight_guids or guid in self._guids

    @property
    def first_sequence(self) -> int:
        return self.cache.first_sequence

    @property
    def last_sequence(self) -> int:
        return self.cache.last_sequence  # what subscribers may be sent: written

    @property
    def last_assigned_sequence(self) -> int:
        return self.cache.last_sequence + self._in_flight + len(self._records)

    @property
    def last_timestamp(self) -> int:
        return self._stamps[-1] if self._stamps else self.cache.last_timestamp

    def state(self) -> tuple[int, int]:
        return self.cache.state()

    def store(
        self,
        records: Sequence[bytes],
        timestamps: Sequence[int],
        guids: Sequence[str] = (),
        fields: Sequence[tuple[str, bytes]] = (),
    ) -> None:
        ids = guids or [""] * len(records)
        if not fields:
            decoded = [pb.MsgProto.FromString(record) for record in records]
            fields = [(msg.reply, msg.data) for msg in decoded]
        self.stream.append_run(self.last_assigned_sequence + 1, fields, timestamps, ids)
        self._records.extend(records)
        self._stamps.extend(timestamps)
        self._guids.extend(ids)

    def lookup(self, sequence: int) -> bytes | None:
        return self.cache.lookup(sequence)

    def sequence_at_or_after(self, timestamp: int) -> int:
        return self.cache.sequence_at_or_after(timestamp)

    def expire(self, now: int) -> int:
        return self.cache.expire(now)  # the stream's max_age drops them there too

    async def flush(self) -> None:
        await self.begin_flush()

    def begin_flush(self) -> asyncio.Task[None]:
        batch = _Batch(self._records, self._stamps, self._guids, self.stream.take())
        self._records, self._stamps, self._guids = [], [], []
        previous = self._tail
        # Numbered after a batch still in flight: it stands or falls with that one.
        after = previous if previous is not None and not previous.done() else None
        sent = None
        ready = (
            self._stream_ready
            and self._led_here
            and not self._behind
            and self.prepare is None
            and self._may_write()
        )
        if batch.writes and ready and (after is None or self.stream.pipelines):
            sent = self.stream.send(batch.writes)
        self._in_flight += len(batch.records)
        self._in_flight_guids.update(batch.guids)
        task = asyncio.get_running_loop().create_task(self._write(batch, sent, previous, after))
        self._tail = task
        return task

    def _may_write(self) -> bool:
        if self.fence is None:
            return True
        try:
            self.fence()
        except StoreError:
            return False
        return True

    async def _write(
        self,
        batch: _Batch,
        sent: Sent | None,
        previous: asyncio.Task[None] | None,
        after: asyncio.Task[None] | None,
    ) -> None:
        try:
            if previous is not None:
                try:
                    await asyncio.shield(previous)  # in order: a later batch waits
                except StoreError as exc:
                    if previous is after:
                        if sent is not None:
                            self.stream.abandon(sent)
                        raise StoreError(f"an earlier write to the channel failed: {exc}") from exc
            if self.prepare is not None:
                await self.prepare()
                self.prepare = None
            if not self._stream_ready:
                await self.stream.ensure()
                self._stream_ready = True
            if not self._led_here:
                # Before the first write of this leadership, with none in flight: a write
                # sent while the stream's leadership moves may go unanswered (5 s).
                await self.stream.settle_leader()
                self._led_here = True
            if self._behind:
                await self._catch_up()
            if sent is None and self.fence is not None:
                self.fence()
            await self.stream.write(batch.writes, sent)
        except StoreError as exc:
            self._settled(batch)
            self._behind = True
            if isinstance(exc, StreamFenced):
                channel = self.stream.channel
                raise StoreError(f"channel {channel!r} was written by another node: {exc}") from exc
            raise
        except BaseException:
            self._settled(batch)
            self._behind = True
            raise
        self._settled(batch)
        if batch.records:
            self.cache.store(batch.records, batch.stamps)
            self._recent.add_stamped(batch.guids, batch.stamps)

    def _settled(self, batch: _Batch) -> None:
        self._in_flight -= len(batch.records)
        self._in_flight_guids.difference_update(batch.guids)

    async def _catch_up(self) -> None:
        last = await self.stream.stream_last()
        have = self.cache.last_sequence
        if last > have:
            records: list[bytes] = []
            stamps: list[int] = []
            guids: list[str] = []
            async for record, guid in self.stream.read(have + 1, last):
                records.append(record)
                stamps.append(pb.MsgProto.FromString(record).timestamp)
                guids.append(guid)
            if records:
                self.cache.store(records, stamps)
                self._recent.add_stamped(guids, stamps)
        self.stream.last_sequence = max(last, have)
        self._behind = False

    def close(self) -> None:
        self.cache.close()


@dataclass(frozen=True, slots=True)
class _Batch:
    """The messages of one flush and their stream writes."""

    records: list[bytes]
    stamps: list[int]
    guids: list[str]
    writes: Writes


class RecentGuids:
    """Publish IDs stored within the duplicate window (by the messages' timestamps), so
    that a client's resend after a failover is acknowledged instead of stored again.
    Kept by runs of one timestamp: a publish batch is one run (one set update, one entry)."""

    def __init__(self, window: float) -> None:
        self._window_ns = int(window * 1e9)
        self._order: deque[tuple[int, list[str]]] = deque()
        self._ids: set[str] = set()

    def __contains__(self, guid: str) -> bool:
        return guid in self._ids

    def add_stamped(self, guids: Sequence[str], stamps: Sequence[int]) -> None:
        if not guids:
            return
        if stamps[0] == stamps[-1]:  # stamps never decrease: one run
            self._add_run(stamps[-1], guids)
        else:
            start = 0
            for index in range(1, len(stamps) + 1):
                if index == len(stamps) or stamps[index] != stamps[start]:
                    self._add_run(stamps[start], guids[start:index])
                    start = index
        horizon = self._order[-1][0] - self._window_ns if self._order else 0
        while self._order and self._order[0][0] < horizon:
            self._ids.difference_update(self._order.popleft()[1])

    def _add_run(self, stamp: int, guids: Sequence[str]) -> None:
        run = [guid for guid in guids if guid]
        if run:
            self._order.append((stamp, run))
            self._ids.update(run)


@dataclass
class _Tracked:
    record: SubRecord
    pending: set[int] = field(default_factory=set)


class ReplicatedSubscriptions(SubscriptionStore):
    """A channel's subscriptions: IDs and limits from the memory store; each record and
    its pending sequences kept here to be written as one ``SubscriptionSnapshot``.
    Creations, updates and deletions go out at :meth:`flush` (before the server answers
    the request); sent and acked sequences every second, as the reference replicates
    them lazily — a new leader redelivers what it does not know was acknowledged."""

    def __init__(self, cache: SubscriptionStore, state: ReplicatedMap, channel: str) -> None:
        self.cache = cache
        self._state = state
        self._channel = channel
        self.tracked: dict[int, _Tracked] = {}
        self._changed: set[int] = set()

    def restore(self, record: SubRecord, pending: list[int]) -> None:
        note = getattr(self.cache, "note_id", None)
        if note is not None:
            note(record.id, True)
        self.tracked[record.id] = _Tracked(record.copy(), set(pending))

    def _key(self, sub_id: int) -> str:
        return kv_key("sub", self._channel, str(sub_id))

    def _write(self, sub_id: int) -> None:
        tracked = self.tracked.get(sub_id)
        if tracked is None:
            return
        snapshot = spb.SubscriptionSnapshot(
            State=sub_to_proto(tracked.record), AcksPending=sorted(tracked.pending)
        )
        self._state.put(self._key(sub_id), snapshot.SerializeToString())

    def create(self, record: SubRecord) -> None:
        self.cache.create(record)
        self.tracked[record.id] = _Tracked(record.copy())
        self._write(record.id)

    def update(self, record: SubRecord) -> None:
        tracked = self.tracked.get(record.id)
        if tracked is None:
            tracked = self.tracked[record.id] = _Tracked(record.copy())
        else:
            tracked.record = record.copy()
        self._write(record.id)

    def delete(self, sub_id: int) -> None:
        self.cache.delete(sub_id)
        self.tracked.pop(sub_id, None)
        self._changed.discard(sub_id)
        self._state.delete(self._key(sub_id))

    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        tracked = self.tracked.get(sub_id)
        if tracked is None or not sequences:
            return
        tracked.pending.update(sequences)
        tracked.record.last_sent = max(tracked.record.last_sent, sequences[-1])
        self._changed.add(sub_id)

    def record_ack(self, sub_id: int, sequence: int) -> None:
        tracked = self.tracked.get(sub_id)
        if tracked is not None:
            tracked.pending.discard(sequence)
            self._changed.add(sub_id)

    def write_changed(self) -> None:
        changed, self._changed = self._changed, set()
        for sub_id in changed:
            self._write(sub_id)

    async def flush(self) -> None:
        await self._state.flush()

    def close(self) -> None:
        self.cache.close()
