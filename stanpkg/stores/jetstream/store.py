"""The clustered store: every replicated fact in JetStream, served from the leader's memory.

* Each channel is one stream (``channel_streams.py``, ``replicated_messages.py``): STAN
  sequence = stream sequence, written pipelined with ``Nats-Expected-Last-Sequence`` so
  that only the lease holder, in order, can append (a stale leader is fenced by JetStream
  itself).
* Server info, clients, channels and subscriptions (with their pending sequences) are
  records of one replicated map (``kvmap.py``, ``replicated_subs.py``), written in batches.
* Names, keys and the records' bytes are ``layout.py``'s and ``records.py``'s.
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import (
    ChannelStore,
    ClientRecord,
    LockableStore,
    NatsBackedStore,
    RecoveredChannel,
    RecoveredState,
    RecoveredSubscription,
    ReplicatedStore,
    ServerInfo,
    StandbyState,
    Store,
    StoreError,
    StoreLog,
)
from stanpkg.stores.jetstream.channel_streams import ChannelStream
from stanpkg.stores.jetstream.jetstream_api import (
    API_TIMEOUT,
    connect,
    raise_if_cancelled,
    wait_ready,
)
from stanpkg.stores.jetstream.kvmap import ReplicatedMap
from stanpkg.stores.jetstream.layout import (
    LEASE_KEY,
    channel_key,
    client_key,
    kv_stream,
    lease_bucket,
    records_bucket,
    sub_key,
)
from stanpkg.stores.jetstream.leadership import LeaderGathering
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.records import (
    ClusterRecords,
    channel_record,
    client_record,
    decode_records,
    server_record,
)
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.replicated_subs import ReplicatedSubscriptions
from stanpkg.stores.jetstream.standby_view import StandbyRefresher, read_standby_state
from stanpkg.stores.jetstream.stream_management import remove_stream_peer, stream_replicas
from stanpkg.stores.memory import MemoryMessageStore, MemoryStore
from stanpkg.transport.connection import NatsConnection
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
        """The KV bucket of the cluster's records (:func:`layout.records_bucket`)."""
        return records_bucket(self.cluster_id)


class ClusteredStore(Store, NatsBackedStore, LockableStore, ReplicatedStore):
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
        # JetStream: the channels' streams (the hot path), the records, the lease.
        self._conn: NatsConnection | None = None
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
        self._conn = await connect(endpoint, name=name)

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        """Returns once this node holds the cluster's lease and has loaded the state."""
        settings = self.settings
        self._on_lost = on_lost
        self._state = await self._open_state()
        self._state.fence = self._check_lease
        self._lease = Lease(
            self._require_conn(),
            bucket=lease_bucket(settings.cluster_id),
            key=LEASE_KEY,
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
            records = self._record_streams()  # the channels' streams move at their first write
            self._gathering = LeaderGathering(self._require_conn(), lambda: records, self.log)
            self._gathering.start()
        return True

    async def _settle_leader(self, stream: str) -> None:
        if self._gathering is not None:
            await self._gathering.lead_here(stream)

    def _record_streams(self) -> list[str]:
        """The streams of the lease's and the records' buckets."""
        cluster_id = self.settings.cluster_id
        return [kv_stream(lease_bucket(cluster_id)), kv_stream(records_bucket(cluster_id))]

    def _stream_names(self) -> list[str]:
        """Every stream of the cluster: the records, the lease, each channel's."""
        streams = self._record_streams()
        for channel in self._channels.values():
            msgs = channel.msgs
            assert isinstance(msgs, ReplicatedMessages)
            streams.append(msgs.stream.name)
        return streams

    async def _open_state(self) -> ReplicatedMap:
        """The cluster's records, once JetStream can keep them with every replica: that
        needs a quorum of the peers (and routes to them)."""
        conn, settings = self._require_conn(), self.settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PEERS_TIMEOUT
        while True:
            try:
                await wait_ready(conn, max(0.0, deadline - loop.time()))
                return await ReplicatedMap.open(conn, settings.bucket, replicas=settings.replicas)
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
            leader_timeout = min(leader_timeout + LEADER_PROBE_TIMEOUT, API_TIMEOUT)
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
        decoded = decode_records(records)
        if decoded is None:
            return None
        self._cache.init(decoded.info)
        for client in decoded.clients:
            self._cache.add_client(client)
        channels = []
        for name in decoded.channels:
            store = self._open_channel(name, new=False)
            # One channel at a time: the elections run side by side anyway, and asking
            # every channel's stream at once multiplies the requests JetStream gets while
            # it elects (measured: no faster, if anything slower, with 10 channels).
            leader_timeout = await self._load_messages(store, deadline, leader_timeout)
            channels.append(self._restore_subs(store, decoded))
        return RecoveredState(decoded.info, decoded.clients, channels)

    def _restore_subs(self, store: ChannelStore, decoded: ClusterRecords) -> RecoveredChannel:
        recovered = RecoveredChannel(store)
        replicated = store.subs
        assert isinstance(replicated, ReplicatedSubscriptions)
        for sub in decoded.subs.get(store.name, ()):
            replicated.restore(sub.record, sub.pending)
            recovered.subscriptions.append(RecoveredSubscription(sub.record, sub.pending))
        return recovered

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
            leader_timeout = min(leader_timeout + LEADER_PROBE_TIMEOUT, API_TIMEOUT)
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
        self._put(*server_record(info))

    def add_client(self, record: ClientRecord) -> None:
        self._cache.add_client(record)
        self._put(*client_record(record))

    def delete_client(self, client_id: str) -> None:
        self._cache.delete_client(client_id)
        self._require_leading().delete(client_key(client_id))
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
            self._put(*channel_record(name))
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
            state.delete(sub_key(name, sub_id))
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
            self._state.delete(channel_key(name))
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
        if self._lease is not None or self._conn is not None:
            self._spawn(self._shutdown())

    async def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            if self._leading and self._state is not None:
                await self._flush_lazy_state()
                await self._state.flush()
        if self._lease is not None:
            with contextlib.suppress(Exception):
                await self._lease.release()  # a standby takes over at once
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
