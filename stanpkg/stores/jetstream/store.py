"""The clustered store: every replicated fact in JetStream, served from the leader's memory.

* The channels are subjects of a fixed number of shared streams (``shared_streams.py``,
  ``channel_log.py``, ``replicated_messages.py``): each message carries its STAN sequence,
  which the store assigns, and each write expects the stream sequence of its channel's
  last message (``Nats-Expected-Last-Subject-Sequence``), so that only the lease holder,
  in order, can append (a stale leader is fenced by JetStream itself). Creating a channel
  creates no stream; the streams are created, or checked, at promotion.
* Server info, clients, channels, each channel's figures and subscriptions (with their
  pending sequences) are records of one replicated map (``records_map.py``,
  ``replicated_subs.py``), written in batches.
* Names, keys and the records' bytes are ``layout.py``'s and ``record_codec.py``'s.
* Channels are written through one ``ClusterWriter`` (``cluster_writer.py``), as
  ``stanpkg migrate`` writes them.
* The store goes through phases, each an object built whole when it begins
  (``phases.py``): connected (``Link``), contending for the lease (``Contention``),
  serving (``ServingTerm``).
* One node serves: the holder of the lease (``lease.py``). The others stand by; the one
  that takes the lease over reads the records (a cluster of layout 1 converted first,
  ``conversion.py``) and serves at once, each channel once its own shared stream
  answers and its figures are read (``channel_loads.py``, ``promotion.py``): no message
  is read at promotion. Messages are kept in pages while memory allows and read from the
  stream on demand (``paged_messages.py``); the pages' figures apply the channel limits,
  and what they drop is purged from the streams lazily.
* Nothing runs per channel while the cluster is idle: positions, figures and purges are
  replicated once a second for the channels that changed only (``lazy_replication.py``).

Before this node holds the lease it knows nothing: ``recover`` returns None and writes are
refused, so a follower never touches the cluster's state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from stanpkg.stores.base import (
    ChannelStore,
    ClientRecord,
    LockableStore,
    NatsBackedStore,
    PipeliningStore,
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
from stanpkg.stores.jetstream.channel_loads import ChannelLoads
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.cluster_writer import ClusterWriter
from stanpkg.stores.jetstream.connection import connect, raise_if_cancelled, wait_ready
from stanpkg.stores.jetstream.conversion import Conversion
from stanpkg.stores.jetstream.handover import hand_over_or_release
from stanpkg.stores.jetstream.layout import (
    LAYOUT_VERSION,
    PLAIN_LAYOUT_VERSION,
    channel_key,
    client_key,
    kv_stream,
    lease_bucket,
    records_bucket,
    state_key,
    sub_key,
)
from stanpkg.stores.jetstream.lazy_replication import LazyReplication, figures_of
from stanpkg.stores.jetstream.leader_moves import SharedStreamMoves, gather_leaders
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.paged_messages import PageCache, PagedMessages
from stanpkg.stores.jetstream.phases import Contention, Link, ServingTerm
from stanpkg.stores.jetstream.promotion import Patience, convert_legacy, read_added
from stanpkg.stores.jetstream.record_codec import (
    ClusterRecords,
    Layout,
    channel_record,
    client_record,
    decode_records,
    layout_record,
    server_record,
)
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.replicated_subs import ReplicatedSubscriptions
from stanpkg.stores.jetstream.settings import ClusterSettings
from stanpkg.stores.jetstream.shared_streams import SharedStreams
from stanpkg.stores.jetstream.standby_view import StandbyView, read_standby_state
from stanpkg.stores.jetstream.stream_management import remove_stream_peer, stream_replicas
from stanpkg.stores.memory import MemoryStore
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.nuid import next_nuid

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["ClusterSettings", "ClusteredStore"]

PEERS_TIMEOUT = 60.0  # until JetStream has the quorum the replicas need
RETRY_INTERVAL = 0.5
FLUSH_WITHIN = 1.5  # seconds for a stopping node's last records
ALL = 2**63 - 1  # a stream sequence past every message: a purge below it takes them all


class ClusteredStore(Store, NatsBackedStore, LockableStore, ReplicatedStore, PipeliningStore):
    type_name = "RAFT"
    pipelines_writes = True

    def __init__(self, plan: Plan, log: StoreLog, settings: ClusterSettings) -> None:
        self.plan = plan
        self.log = log
        self.settings = settings
        self._cache = MemoryStore(plan.store_limits, log)  # clients, subscriptions, limits
        self._pages = PageCache(settings.read_cache)  # the channels' messages kept
        self._channels: dict[str, ChannelStore] = {}
        # The phases (phases.py), each built whole as it begins.
        self._link: Link | None = None
        self._contention: Contention | None = None
        self._term: ServingTerm | None = None
        self._loaded: RecoveredState | None = None  # the promotion's, for recover()
        self._pending_flush: asyncio.Task[None] | None = None
        self._lazy = LazyReplication(self._channels, self._records, log)
        # Channels deleted here whose messages are being (or could not be) purged, with
        # the subject they were on.
        self._deletions: dict[str, tuple[asyncio.Task[bool], ChannelLog]] = {}
        self._closing = False
        self._closed: asyncio.Task[None] | None = None  # close's background part
        self._successor = ""  # the node this one handed the cluster over to

    # -- connecting and leading -------------------------------------------------------

    async def connect(self, endpoint: NatsEndpoint) -> None:
        name = f"_NSS-{self.settings.cluster_id}-{self.settings.node_id}-cluster"
        self._link = Link(await connect(endpoint, name=name), endpoint)

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        """Returns once this node holds the cluster's lease and has loaded the state."""
        settings, link = self.settings, self._require_link()
        records = await self._open_records(link.conn)
        records.fence = self._check_lease

        def lost(reason: str) -> None:
            self._step_back(contention, f"cluster lease lost: {reason}")

        lease = Lease.for_cluster(
            link.endpoint, settings.cluster_id, settings.node_id,
            ttl=settings.lease_ttl, replicas=settings.replicas, on_lost=lost,
        )  # fmt: skip
        standby = StandbyView(self._read_standby_state, self.log)
        contention = self._contention = Contention(link, records, lease, standby, on_lost)
        standby.start()
        try:
            await lease.wait_until_held()
        finally:
            standby.stop()  # the leader serves from its own state: no reading
        contention.serving = True
        try:
            self._loaded = await self._promote(contention)
        except BaseException:
            contention.serving = False
            if self._term is not None:
                self._term.stop()
            raise
        self._lazy.start()
        return True

    async def wait_loaded(self) -> None:
        """Until every channel of this leadership's promotion is loaded (or failed)."""
        if self._term is not None:
            await self._term.loads.wait()

    def _records(self) -> ReplicatedMap | None:
        return self._contention.records if self._contention is not None else None

    def _record_streams(self) -> list[str]:
        """The streams of the lease's and the records' buckets."""
        cluster_id = self.settings.cluster_id
        return [kv_stream(lease_bucket(cluster_id)), kv_stream(records_bucket(cluster_id))]

    def _stream_names(self) -> list[str]:
        """Every stream of the cluster: the records, the lease, the shared streams."""
        shared = self._term.writer.streams.names() if self._term is not None else []
        return self._record_streams() + shared

    async def _open_records(self, conn: NatsConnection) -> ReplicatedMap:
        """The cluster's records, once JetStream can keep them with every replica: that
        needs a quorum of the peers (and routes to them)."""
        settings = self.settings
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
        as the channels' writes are (expected last subject sequence), so a node paused
        past its lease could otherwise overwrite the records of the node that took over."""
        contention = self._contention
        if contention is None or not contention.lease.fresh:
            raise StoreError("this node's lease on the cluster is not current: not writing")

    def _require_link(self) -> Link:
        if self._link is None:
            raise StoreError("the clustered store is not connected")
        return self._link

    def _serving(self) -> ServingTerm | None:
        """This node's term, while it serves."""
        term = self._term
        return term if term is not None and term.contention.serving else None

    def _require_serving(self) -> ServingTerm:
        term = self._serving()
        if term is None:
            raise StoreError("this node does not lead the cluster")
        return term

    async def remove_cluster_node(self, node_id: str) -> None:
        """Move the replicas node ``node_id`` holds (the shared streams, records, the
        lease) to the cluster's other JetStream servers: JetStream needs a server without
        a replica of each stream to move it to, so the replacement node is started first."""
        conn = self._require_serving().writer.conn
        for stream in self._stream_names():
            if node_id in await stream_replicas(conn, stream):
                await remove_stream_peer(conn, stream, node_id)

    # -- loading (promotion) ------------------------------------------------------------

    async def _promote(self, contention: Contention) -> RecoveredState | None:
        """Load, waiting while JetStream elects leaders for the streams the dead node led
        (seconds): the records first, then the shared streams (a cluster of layout 1
        converted before), each asked again on its own while it elects."""
        patience = Patience(self.log, lambda: contention.serving)
        records = contention.records
        decoded = decode_records(await patience.run(records.load, "retrying"))
        settings = self.settings
        writer = ClusterWriter(
            contention.link.conn, settings.cluster_id, settings.replicas,
            recorded=[i for i in (decoded.channels.values() if decoded else ()) if i is not None],
            new_streams=settings.channel_streams, writer_id=next_nuid(),
            pack_bytes=settings.pack_bytes,
        )  # fmt: skip
        if decoded is not None and decoded.legacy:
            conversion = Conversion(writer, records, self.log, check=self._check_lease)
            await convert_legacy(decoded, conversion, patience, self.log)
            patience.restart()
        else:
            # Version 3 once packs may be in the streams: written by this node or before.
            packs = settings.pack_bytes > 0 or (
                decoded is not None
                and decoded.layout is not None
                and decoded.layout.version == LAYOUT_VERSION
            )
            if decoded is None or decoded.layout != _layout_of(settings.channel_streams, packs):
                records.put(*layout_record(settings.channel_streams, packs=packs))
                self._schedule_flush()
        moves = None
        if settings.replicas > 1:
            moves = gather_leaders(
                writer.conn, self._record_streams(), writer.streams.names(), self.log,
                entitled=lambda: contention.serving and contention.lease.fresh,
            )  # fmt: skip
        loads = self._channel_loads(writer.streams, patience, decoded, self._load_failed, moves)
        self._term = ServingTerm(contention, writer, loads, moves)
        if decoded is not None:
            self._cache.init(decoded.info)
            for client in decoded.clients:
                self._cache.add_client(client)
        # The node serves from here on; each channel once its own stream answers.
        opened = self._open_recorded(decoded.channels if decoded is not None else {})
        loads.start(opened, decoded.states if decoded is not None else {})
        if decoded is None:
            return None
        recovered = [self._restore_subs(self._channels[name], decoded) for name in decoded.channels]
        return RecoveredState(decoded.info, decoded.clients, recovered)

    def _open_recorded(
        self, channels: dict[str, int | None]
    ) -> dict[int, dict[str, ReplicatedMessages]]:
        """The recorded ``channels`` opened (to be loaded), by shared stream."""
        opened: dict[int, dict[str, ReplicatedMessages]] = {}
        for name, index in channels.items():
            msgs = self._open_channel(name, new=False, index=index or 0).msgs
            assert isinstance(msgs, ReplicatedMessages)
            opened.setdefault(index or 0, {})[name] = msgs
        return opened

    def _channel_loads(
        self,
        streams: SharedStreams,
        patience: Patience,
        decoded: ClusterRecords | None,
        on_failed: Callable[[str], None],
        moves: SharedStreamMoves | None,
    ) -> ChannelLoads:
        recorded = decoded.states if decoded is not None else {}

        def loaded(name: str) -> None:
            msgs = self._lazy.replicated(name)
            if msgs is None:
                return
            # What the limits dropped goes from the stream; changed figures are written.
            if msgs.needs_purge:
                self._lazy.dropped.add(name)
            if recorded.get(name) != figures_of(msgs):
                self._lazy.states_changed.add(name)

        def ensured(stream: str) -> None:
            if moves is not None:
                moves.start(stream)

        return ChannelLoads(
            streams, patience, on_ensured=ensured, on_loaded=loaded, on_failed=on_failed
        )

    def _load_failed(self, reason: str) -> None:
        """A stream of the promotion could not be loaded: its channels cannot be served
        here, so this node steps down (handing over to a peer that may load it)."""
        if self._closing or self._serving() is None:
            return
        self.log.error(f"Unable to serve the cluster: {reason}")
        assert self._contention is not None
        self._step_back(self._contention, f"cluster state not loaded: {reason}")

    def _step_back(self, contention: Contention, reason: str) -> None:
        """This node serves no more. Its moves of leaders stop at once, not when the
        server's stop closes the store (which can take long on a loaded node): moved here,
        the lease's stream would leave the successor (see ``leader_moves``). Then the
        server steps back to standby."""
        contention.serving = False
        if self._term is not None:
            self._term.stop_moves()
        contention.on_lost(reason)

    async def load_channels(self, names: list[str]) -> RecoveredState:
        """While serving: the channels ``names`` another writer (``stanpkg migrate``)
        added, loaded as a promotion loads them (promotion.read_added), with the clients
        of the records this node does not know (the migration's: a client closed here is
        no longer in them, one whose removal is still queued is heartbeated out as any
        recovered client). Channels this node has are left out."""
        term = self._require_serving()
        patience = Patience(self.log, lambda: term.contention.serving)
        streams = term.writer.streams
        added = await read_added(
            term.records, streams, names, set(self._channels), patience, self.log
        )
        decoded = added.records
        channels: dict[str, int | None] = {
            name: index
            for name, index in added.channels.items()
            if name not in self._channels  # created by a client meanwhile: its own
        }
        failures: list[str] = []
        loads = self._channel_loads(streams, patience, decoded, failures.append, term.moves)
        loads.start(self._open_recorded(channels), decoded.states)
        await loads.wait()
        if failures:
            raise StoreError(failures[0])
        recovered = [self._restore_subs(self._channels[name], decoded) for name in channels]
        clients = [client for client in decoded.clients if client.id not in self._cache.clients]
        for client in clients:
            self._cache.add_client(client)
        return RecoveredState(decoded.info, clients, recovered)

    def _restore_subs(self, store: ChannelStore, decoded: ClusterRecords) -> RecoveredChannel:
        recovered = RecoveredChannel(store)
        replicated = store.subs
        assert isinstance(replicated, ReplicatedSubscriptions)
        for sub in decoded.subs.get(store.name, ()):
            replicated.restore(sub.record, sub.pending)
            recovered.subscriptions.append(RecoveredSubscription(sub.record, sub.pending))
        return recovered

    # -- the Store interface --------------------------------------------------------------

    def standby_state(self) -> StandbyState | None:
        contention = self._contention
        if contention is None or contention.serving:
            return None
        return contention.standby.current()

    async def _read_standby_state(self) -> StandbyState | None:
        records = self._records()
        assert records is not None
        return await read_standby_state(records, asyncio.get_running_loop().time())

    def lock_holder_silent(self) -> bool:
        contention = self._contention
        return contention is not None and (contention.lease.held or contention.lease.holder_silent)

    def recover(self) -> RecoveredState | None:
        # A follower has no state; the leader returns what it loaded at promotion.
        if self._serving() is None:
            return None
        loaded, self._loaded = self._loaded, None
        return loaded

    def init(self, info: ServerInfo) -> None:
        if self._serving() is None:
            return  # the start-up "No recovered state" of a follower
        self._cache.init(info)
        self._put(*server_record(info))

    def add_client(self, record: ClientRecord) -> None:
        self._cache.add_client(record)
        self._put(*client_record(record))

    def delete_client(self, client_id: str) -> None:
        self._cache.delete_client(client_id)
        self._require_serving().records.delete(client_key(client_id))
        self._schedule_flush()

    def create_channel(self, name: str) -> ChannelStore:
        return self._open_channel(name, new=True)

    def _open_channel(self, name: str, *, new: bool, index: int = 0) -> ChannelStore:
        existing = self._channels.get(name)
        if existing is not None:
            return existing
        cached = self._cache.create_channel(name)  # max_channels
        term = self._require_serving()
        if new:
            index = term.writer.streams.index_of_new(name)
        # Its own writer ID, in the IDs of messages published without one: after a lost
        # answer, the channel's last message tells this node's write from another's.
        log = term.writer.channel_log(name, index, writer_id=next_nuid())
        if term.moves is not None:
            log.settle_leader_of = term.moves.settle
        paged = PagedMessages(
            name,
            cached.limits,
            self.log,
            self._pages,
            lambda first, last: log.read_messages(first, last, *paged.neighbours(first)),
        )
        replicated = ReplicatedMessages(paged, log)
        replicated.fence = self._check_lease
        replicated.on_change = self._lazy.states_changed.add
        replicated.on_dropped = self._lazy.dropped.add
        if new:
            replicated.prepare = lambda: self._prepare_new_channel(term, name, index)
            term.loads.created(index, replicated)
        subs = ReplicatedSubscriptions(cached.subs, term.records, name)
        subs.on_change = self._lazy.subs_changed.add
        channel = ChannelStore(name, replicated, subs, cached.limits)
        self._channels[name] = channel
        if new:
            self._put(*channel_record(name, index))
            self._lazy.states_changed.add(name)
        return channel

    def delete_channel(self, name: str) -> None:
        channel = self._channels.pop(name, None)
        self._cache.delete_channel(name)
        if channel is None:
            return
        records = self._require_serving().records
        subs = channel.subs
        assert isinstance(subs, ReplicatedSubscriptions)
        for sub_id in list(subs.tracked):
            records.delete(sub_key(name, sub_id))
        msgs = channel.msgs
        assert isinstance(msgs, ReplicatedMessages)
        msgs.close()  # its pages; the purge below needs only its log
        deletion = asyncio.get_running_loop().create_task(
            self._purge_channel(name, msgs.channel_log)
        )
        self._deletions[name] = (deletion, msgs.channel_log)
        deletion.add_done_callback(lambda _: self._forget_deletion(name, deletion))
        self._schedule_flush()

    def _forget_deletion(self, name: str, deletion: asyncio.Task[bool]) -> None:
        """A deletion that succeeded needs no more waiting for; a failed one is kept."""
        found = self._deletions.get(name)
        succeeded = not deletion.cancelled() and deletion.result()
        if found is not None and found[0] is deletion and succeeded:
            del self._deletions[name]

    async def _purge_channel(self, name: str, log: ChannelLog) -> bool:
        """The channel's messages first, then its records: a node that takes over in
        between finds the record without messages and serves the channel empty. The
        other way round it would find messages without a record, and a new channel of
        that name would be fenced by them. The records stay when the channel was created
        again meanwhile (its first write waits for this) or the purge failed (the next
        creation tries again, see _prepare_new_channel)."""
        try:
            await log.purge_below(ALL)
        except Exception as exc:  # a background task: every failure is logged, none raised
            self.log.error(f"Unable to delete the messages of channel {name!r}: {exc}")
            return False
        term = self._serving()
        if name not in self._channels and term is not None:
            term.records.delete(channel_key(name))
            term.records.delete(state_key(name))
            self._schedule_flush()
        return True

    async def _prepare_new_channel(self, term: ServingTerm, name: str, index: int) -> None:
        """Before a new channel's first write: its stream answering (at promotion it may
        still elect a leader), its record on a quorum (the node that takes over learns the
        channels from the records), and the messages of a channel of that name deleted
        here gone (the new one starts where no message of it is)."""
        await term.loads.ensured(index)
        await self.records_durable()
        found = self._deletions.get(name)
        if found is None:
            return
        deletion, old = found
        if not await asyncio.shield(deletion):
            await old.purge_below(ALL)  # once more; StoreError fails this write
        if self._deletions.get(name) is found:
            del self._deletions[name]

    def close(self) -> None:
        self._closing = True
        self._cache.close()
        if self._contention is not None:
            self._contention.standby.stop()
        if self._term is not None:
            self._term.stop()
        self._lazy.stop()
        if self._pending_flush is not None:
            self._pending_flush.cancel()
        if self._link is not None:
            self._closed = self._spawn(self._shutdown(self._link))
        else:
            self._close_channels()

    async def wait_closed(self) -> str:
        """HandingOverStore's: a stopping serving node hands the cluster over."""
        if self._closed is not None:
            await asyncio.shield(self._closed)
        return self._successor

    def _close_channels(self) -> None:
        for channel in self._channels.values():
            channel.msgs.close()  # reads on demand stop
        self._channels.clear()

    async def _shutdown(self, link: Link) -> None:
        term = self._serving()
        with contextlib.suppress(Exception):
            if term is not None:
                async with asyncio.timeout(FLUSH_WITHIN):  # without a quorum: no wait
                    await self._lazy.flush()  # the figures of the last second too
                    await term.records.flush()
        self._close_channels()
        contention = self._contention
        if contention is not None:
            with contextlib.suppress(Exception):
                # To a running peer when serving (handover.py), else released.
                self._successor = await hand_over_or_release(
                    contention.lease, link.conn, self.log, serving=term is not None,
                    cluster_id=self.settings.cluster_id, node_id=self.settings.node_id,
                    peers=self.settings.peers, streams=self._stream_names(),
                )  # fmt: skip
        with contextlib.suppress(Exception):
            await link.conn.close()

    # -- replication of records ---------------------------------------------------------

    def _put(self, key: str, value: bytes) -> None:
        self._require_serving().records.put(key, value)
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
            records = self._require_serving().records
            if not records.queued:
                return
            await records.flush()

    def _schedule_flush(self) -> None:
        """Records (clients, channels) go out at once, in one batch per loop turn."""
        if self._pending_flush is None or self._pending_flush.done():
            self._pending_flush = self._spawn(self._flush_records())

    async def _flush_records(self) -> None:
        await asyncio.sleep(0)
        records = self._records()
        if records is None:
            return
        try:
            await records.flush()
        except StoreError as exc:
            self.log.error(f"Unable to replicate the cluster state: {exc}")

    def _spawn(self, coro: object) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        return task


def _layout_of(streams: int, packs: bool) -> Layout:
    return Layout(LAYOUT_VERSION if packs else PLAIN_LAYOUT_VERSION, streams)
