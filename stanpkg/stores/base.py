"""The store interface: everything the streaming server core asks of a store.

The server core knows nothing else about stores. A store persists (or, for MEMORY, just
holds) five kinds of state, mirroring the records of the reference FILE store
(spec/filestore.md): the server information, the clients, one message log per channel,
one subscription log per channel, and per-subscription "sent"/"acked" sequence updates.

Design rules an implementation can rely on, and must honour:

* Calls come from the event-loop thread only, never concurrently. Everything is
  synchronous except the two ``flush`` methods, which the server awaits at its flush
  points (after a publish batch is stored, after the batch's deliveries, after creating
  or removing subscriptions). A durable store may buffer every write until then and
  may move an fsync to a thread there; MEMORY returns at once.
* Messages arrive in batches: :meth:`MessageStore.store` takes a :class:`MessageBatch`,
  the messages of one publish batch for that channel as values ((reply, data) pairs, one
  timestamp for the batch, the publish IDs). The store numbers them (``last + 1`` …),
  encodes the ``pb.MsgProto`` records subscribers receive (``redelivered`` unset) with
  :class:`~stanpkg.proto.encoders.MsgEncoder`, keeps those bytes for ``lookup``, and
  returns the :class:`StoredRun` it assigned. Callers never predict sequences.
* Limits come from :class:`~stanpkg.plan.limits.StoreLimits`: the store enforces
  ``max_channels`` (:meth:`Store.create_channel`), ``max_subs``
  (:meth:`SubscriptionStore.create`), and ``max_msgs``/``max_bytes`` (oldest messages
  dropped, never refused) and ``max_age`` (:meth:`MessageStore.expire`, driven by the
  server's timers) on messages. ``max_inactivity`` is the server's business.
* Records passed in (:class:`ClientRecord`, :class:`SubRecord`) belong to the server,
  which keeps mutating them: a store serializes or copies them, never keeps them.
* :class:`StoreError` texts reach clients verbatim (PubAck / SubscriptionResponse /
  ConnectResponse errors), so limit errors use the reference's exact wording.
* What only some stores can do has no default on :class:`Store` or
  :class:`MessageStore`: it is a capability, a small protocol that a caller asks for
  with :meth:`Store.capability` (:class:`NatsBackedStore`, :class:`LockableStore`,
  :class:`ReplicatedStore`, :class:`HandingOverStore`, :class:`PipeliningStore`,
  :class:`AdoptingStore`) or :meth:`MessageStore.capability`
  (:class:`DeduplicatingMessages`, :class:`PipeliningMessages`,
  :class:`LocatingMessages`) and must handle being absent; a caller on the per-message
  path asks once (at start, at channel creation), not per message. A wrapper
  (stores/delegating.py) forwards every method of the interface, ``capability``
  included, so nothing falls back to a default silently.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Generic,
    Literal,
    NamedTuple,
    Protocol,
    TypeVar,
    cast,
    runtime_checkable,
)

from stanpkg.plan.limits import Limits, StoreLimits

if TYPE_CHECKING:
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = [
    "ADOPTS",
    "BEGINS_FLUSH",
    "DEDUPLICATES",
    "FT_STORES_ONLY",
    "HANDS_OVER",
    "LOCATES",
    "LOCKABLE",
    "NATS_BACKED",
    "PIPELINES_WRITES",
    "REPLICATED",
    "TOO_MANY_CHANNELS",
    "TOO_MANY_SUBS",
    "AdoptingStore",
    "BaseStore",
    "BaseSubscriptionStore",
    "Capability",
    "ChannelStore",
    "ClientRecord",
    "DeduplicatingMessages",
    "HandingOverStore",
    "LocatingMessages",
    "LockableStore",
    "MessageBatch",
    "MessageStore",
    "NatsBackedStore",
    "PipeliningMessages",
    "PipeliningStore",
    "RecoveredChannel",
    "RecoveredState",
    "RecoveredSubscription",
    "ReplicatedStore",
    "SequenceBookkeeping",
    "ServerInfo",
    "StandbyChannel",
    "StandbyState",
    "StandbySubscription",
    "Store",
    "StoreError",
    "StoreLog",
    "StoredRun",
    "SubRecord",
    "SubscriptionStore",
]

TOO_MANY_CHANNELS = "too many channels"
FT_STORES_ONLY = "ft: only FILE or SQL stores supported in FT mode"
TOO_MANY_SUBS = "too many subscriptions per channel"


class StoreError(Exception):
    """A store failure whose text is sent to the client as the error string."""


class StoreLog(Protocol):
    """The part of the server logger a store may use (reference-worded notices)."""

    def notice(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...

    def error(self, text: str) -> None: ...


@dataclass(slots=True)
class ServerInfo:
    """``spb.ServerInfo``: the subjects fixed at the first start (protocol.md §1.1)."""

    cluster_id: str
    discovery: str
    publish: str
    subscribe: str
    unsubscribe: str
    close: str
    sub_close: str
    acks_subs: str
    node_id: str = ""

    @classmethod
    def for_cluster(cls, cluster_id: str, discover_prefix: str) -> ServerInfo:
        """The subjects a new server uses (fixed at its first start, then recovered)."""
        return cls(
            cluster_id=cluster_id,
            discovery=f"{discover_prefix}.{cluster_id}",
            publish=f"_STAN.pub.{cluster_id}",
            subscribe=f"_STAN.sub.{cluster_id}",
            unsubscribe=f"_STAN.unsub.{cluster_id}",
            close=f"_STAN.close.{cluster_id}",
            sub_close=f"_STAN.subclose.{cluster_id}",
            acks_subs=f"_STAN.ack.{cluster_id}",
        )


@dataclass(frozen=True, slots=True)
class ClientRecord:
    """``spb.ClientInfo``: one registered client."""

    id: str
    hb_inbox: str
    conn_id: bytes = b""
    protocol: int = 0
    ping_interval: int = 0
    ping_max_out: int = 0


@dataclass(slots=True)
class SubRecord:
    """``spb.SubState``: one subscription as persisted (internal-protocol.md §1.4).

    ``id`` is assigned by :meth:`SubscriptionStore.create`.
    """

    client_id: str
    inbox: str
    ack_inbox: str
    max_inflight: int
    ack_wait_secs: int
    qgroup: str = ""
    durable_name: str = ""
    last_sent: int = 0
    is_durable: bool = False
    is_closed: bool = False
    id: int = 0

    def copy(self) -> SubRecord:
        return replace(self)


@dataclass(slots=True)
class RecoveredSubscription:
    record: SubRecord
    pending: list[int]  # unacknowledged sequences, ascending


@dataclass(slots=True)
class RecoveredChannel:
    store: ChannelStore
    subscriptions: list[RecoveredSubscription] = field(default_factory=list)


@dataclass(slots=True)
class RecoveredState:
    info: ServerInfo
    clients: list[ClientRecord]
    channels: list[RecoveredChannel]


@dataclass(frozen=True, slots=True)
class StandbySubscription:
    record: SubRecord
    pending_count: int  # unacknowledged messages


@dataclass(frozen=True, slots=True)
class StandbyChannel:
    name: str
    msgs: int
    bytes: int
    first_seq: int
    last_seq: int
    subscriptions: tuple[StandbySubscription, ...]  # by ID


@dataclass(frozen=True, slots=True)
class StandbyState:
    """What a standby node knows of the state another node serves (for monitoring):
    plain records, read at ``read_at`` (monotonic seconds)."""

    info: ServerInfo
    clients: tuple[ClientRecord, ...]
    channels: tuple[StandbyChannel, ...]  # by name
    read_at: float


class MessageBatch(NamedTuple):
    """The messages of one publish batch for one channel, as the server received them."""

    #: Unix ns, the same for every message of the batch (never before the channel's last).
    timestamp: int
    #: (reply, data) of each message, in publish order (the MsgProto's reply and data).
    messages: Sequence[tuple[str, bytes]]
    #: The publishers' message IDs, one per message, for a store that deduplicates (see
    #: :class:`DeduplicatingMessages`); may be empty (then no message has one).
    guids: Sequence[str] = ()


class StoredRun(NamedTuple):
    """The sequences :meth:`MessageStore.store` gave a batch: ``first`` to ``last``
    (``last == first - 1`` for an empty batch)."""

    first: int
    last: int


class MessageStore(ABC):
    """One channel's message log."""

    limits: Limits

    @property
    @abstractmethod
    def first_sequence(self) -> int:
        """Lowest sequence still stored; ``last + 1`` once everything was removed; 0 if
        the channel never had a message."""

    @property
    @abstractmethod
    def last_sequence(self) -> int:
        """Highest sequence ever stored (0 if none); survives removal of every message."""

    @property
    @abstractmethod
    def last_timestamp(self) -> int:
        """Timestamp (Unix ns) of the newest message ever stored, 0 if none."""

    @abstractmethod
    def state(self) -> tuple[int, int]:
        """(number of stored messages, their total size as the store counts it)."""

    @abstractmethod
    def store(self, batch: MessageBatch) -> StoredRun:
        """Append the batch's messages with the next sequences (after every message
        handed to ``store`` before, written or still being written: see
        :meth:`PipeliningMessages.begin_flush`), encoded as MsgProtos of this channel stamped
        ``batch.timestamp``; then drop the oldest messages while ``max_msgs``/``max_bytes``
        are exceeded (keeping at least the newest). Returns the sequences assigned.
        Raises :class:`StoreError` if nothing could be stored. A store that does not
        deduplicate ignores ``batch.guids``."""

    @abstractmethod
    def lookup(self, sequence: int) -> bytes | None:
        """The stored MsgProto bytes, or None when not (or no longer) stored."""

    def lookup_run(self, first: int, last: int) -> list[bytes | None]:
        """:meth:`lookup` of every sequence from ``first`` to ``last``, in order: what a
        subscription is sent in one go. Stores that can read a run at once override it."""
        lookup = self.lookup
        return [lookup(seq) for seq in range(first, last + 1)]

    #: Set by the server: called by a store that reads messages on demand once messages
    #: that :meth:`readable_until` reported missing can be looked up.
    on_readable: Callable[[], None] | None = None

    def readable_until(self, first: int, last: int) -> int:
        """The highest sequence up to ``last`` such that :meth:`lookup` answers for
        ``first`` to it now (None for a message gone). A store that reads its messages
        on demand (the clustered store) starts reading the rest and calls
        :attr:`on_readable` when it can; every other store has them at hand."""
        return last

    async def find_time(self, timestamp: int) -> None:
        """Make :meth:`sequence_at_or_after` able to answer for ``timestamp`` (a store
        reading on demand reads what its search needs)."""
        return

    @property
    def loading(self) -> bool:
        """Whether the channel is still being loaded (a clustered store's promotion reads
        each channel's figures once its stream has a leader): until :meth:`wait_loaded`
        returns, nothing may be stored, no message is readable, and the figures are the
        last recorded ones. Every other store has its channels loaded at recovery."""
        return False

    async def wait_loaded(self) -> None:
        """Returns once the channel is loaded; StoreError when it could not be."""
        return

    @abstractmethod
    def sequence_at_or_after(self, timestamp: int) -> int:
        """First stored sequence whose timestamp is ≥ ``timestamp``; ``last + 1`` if the
        time is after every stored message; 0 if the channel never had a message."""

    @abstractmethod
    def expire(self, now: int) -> int:
        """Remove messages with ``now - timestamp >= max_age`` (oldest first; all may
        go). Returns the timestamp of the oldest remaining message, 0 if none (or if
        the channel has no age limit), so the caller can arm its next check."""

    async def flush(self) -> None:
        """Make everything stored so far durable (no-op for memory)."""
        return

    def capability(self, kind: Capability[_C]) -> _C | None:
        """This message store as ``kind`` (see :class:`Capability`), or None when it does
        not have that capability. A wrapper answers for the message store it wraps."""
        return kind.of(self)

    def close(self) -> None:
        """Release resources; the store is not used afterwards."""
        return


class SequenceBookkeeping:
    """The first/last sequence and newest timestamp, kept the same way by every message
    store implementation (mix in before :class:`MessageStore`)."""

    _first: int
    _last: int
    _last_ts: int

    @property
    def first_sequence(self) -> int:
        return self._first

    @property
    def last_sequence(self) -> int:
        return self._last

    @property
    def last_timestamp(self) -> int:
        return self._last_ts


class SubscriptionStore(ABC):
    """One channel's subscription log."""

    @abstractmethod
    def create(self, record: SubRecord) -> None:
        """Persist a new subscription and set ``record.id``. Raises
        ``StoreError(TOO_MANY_SUBS)`` when ``max_subs`` is reached."""

    @abstractmethod
    def update(self, record: SubRecord) -> None:
        """Replace the persisted state of ``record.id`` (pending sequences are kept)."""

    @abstractmethod
    def delete(self, sub_id: int) -> None:
        """Forget the subscription and its pending sequences."""

    @abstractmethod
    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        """Sequences sent for the first time to the subscription: now pending."""

    @abstractmethod
    def record_ack(self, sub_id: int, sequence: int) -> None:
        """A pending sequence was acknowledged (explicitly or implicitly)."""

    async def flush(self) -> None:
        """Make recorded changes durable (no-op for memory)."""
        return

    def close(self) -> None:
        """Release resources; the store is not used afterwards."""
        return


class BaseSubscriptionStore(SubscriptionStore):
    """ID assignment and the ``max_subs`` limit, shared by implementations.

    IDs are ``largest ID known + 1`` (filestore.md §5.1): a durable store feeds every ID
    it sees at recovery (including deleted ones) to :meth:`note_id`.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._max_id = 0
        self._live: set[int] = set()

    def note_id(self, sub_id: int, live: bool) -> None:
        self._max_id = max(self._max_id, sub_id)
        if live:
            self._live.add(sub_id)
        else:
            self._live.discard(sub_id)

    def create(self, record: SubRecord) -> None:
        max_subs = self.limits.max_subs
        if max_subs > 0 and len(self._live) >= max_subs:
            raise StoreError(TOO_MANY_SUBS)
        self._max_id += 1
        record.id = self._max_id
        self._live.add(record.id)
        self._persist_new(record)

    def delete(self, sub_id: int) -> None:
        self._live.discard(sub_id)
        self._persist_delete(sub_id)

    def _persist_new(self, record: SubRecord) -> None:
        """Hook: write the "new subscription" record."""

    def _persist_delete(self, sub_id: int) -> None:
        """Hook: write the "delete subscription" record."""


@dataclass(slots=True)
class ChannelStore:
    """A channel's two stores."""

    name: str
    msgs: MessageStore
    subs: SubscriptionStore
    limits: Limits


# -- capabilities: what only some stores can do -------------------------------------------


@runtime_checkable
class NatsBackedStore(Protocol):
    """A store kept in NATS itself (the clustered store)."""

    @abstractmethod
    async def connect(self, endpoint: NatsEndpoint) -> None:
        """Called once the server's NATS connections are up, before recovery."""


@runtime_checkable
class LockableStore(Protocol):
    """A store that servers can share, one using it at a time (fault-tolerant mode: FILE
    and SQL; the clustered store's lease)."""

    @abstractmethod
    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        """One attempt to become the only server using this store; True when this store
        now holds the lock (until ``close``), False when another server does.
        ``on_lost(reason)`` is called if the lock is lost later. Raises StoreError for
        any other failure."""


@runtime_checkable
class ReplicatedStore(Protocol):
    """A store replicated on the cluster's nodes (the clustered store)."""

    @abstractmethod
    def standby_state(self) -> StandbyState | None:
        """While this node stands by: the last known state of the node that serves, if
        it could be read (never blocks); None before that, and once this node serves."""

    @abstractmethod
    def lock_holder_silent(self) -> bool:
        """While this node waits for the lock, True when its holder has not renewed it
        for half the lease time (a takeover may follow), and from when this node holds
        it: no other node serves."""

    @abstractmethod
    async def remove_cluster_node(self, node_id: str) -> None:
        """Move the replicas this store keeps on node ``node_id`` to the cluster's other
        servers (StoreError when that cannot be done)."""

    @abstractmethod
    async def load_channels(self, names: list[str]) -> RecoveredState:
        """While serving: the channels ``names`` another writer (``stanpkg migrate``)
        added to the cluster's state, loaded as a promotion loads them, with the
        clients this node does not know yet; channels it has are left out."""


@runtime_checkable
class HandingOverStore(Protocol):
    """A store whose :meth:`Store.close` goes on in the background and may hand the
    service to another server (the clustered store on a graceful stop)."""

    @abstractmethod
    async def wait_closed(self) -> str:
        """After ``close``: until what it started is done (bounded). The node ID the
        service was handed over to, which answers clients at once; "" for none."""


@runtime_checkable
class PipeliningStore(Protocol):
    """A store whose message writes are network round trips that the server overlaps:
    several publish batches in flight at once (the clustered store). Its channels'
    message stores are :class:`PipeliningMessages`."""

    #: The declaration itself (a store without the capability has no such attribute).
    pipelines_writes: Literal[True]


@runtime_checkable
class AdoptingStore(Protocol):
    """A store that serves the channels of the store it wraps its own way (the
    encrypting store wraps each channel's messages): channels that a capability of the
    inner store loaded while the server runs must go through :meth:`adopt`."""

    @abstractmethod
    def adopt(self, state: RecoveredState) -> RecoveredState:
        """Channels a capability loaded while the server runs (a clustered store's
        :meth:`ReplicatedStore.load_channels`), as this store serves them: wrapped as
        it wraps recovered ones."""


@runtime_checkable
class DeduplicatingMessages(Protocol):
    """A message store that remembers recent publish IDs (``batch.guids`` of
    :meth:`MessageStore.store`; the clustered store keeps them across a failover): the
    server acknowledges a resend without storing it again."""

    @abstractmethod
    def has_guid(self, guid: str) -> bool:
        """Whether a message with this publish ID was stored recently."""


@runtime_checkable
class PipeliningMessages(Protocol):
    """A message store whose writes can start now and be awaited later, several at once
    (the clustered store's, see :class:`PipeliningStore`)."""

    @abstractmethod
    def begin_flush(self) -> Awaitable[None]:
        """:meth:`MessageStore.flush`, started now for what was stored so far and awaited
        later. Writing starts at once, and messages stored afterwards may be flushed
        before this one is awaited; they are visible (``last_sequence``,
        :meth:`MessageStore.lookup`) only once written, in order."""


@runtime_checkable
class LocatingMessages(Protocol):
    """A message store that can say where a stored message is, for error texts (the
    FILE store names its file and offset)."""

    @abstractmethod
    def locate(self, sequence: int) -> str:
        """Where the stored message is; "" when it is not stored."""


_C = TypeVar("_C")


class Capability(Generic[_C]):
    """Names a capability protocol for :meth:`Store.capability` (or
    :meth:`MessageStore.capability`), typed: a store has it
    when it implements the protocol. (A key rather than the protocol class itself:
    mypy accepts no protocol where ``type[T]`` is expected.)"""

    __slots__ = ("protocol",)

    def __init__(self, protocol: type) -> None:
        self.protocol = protocol  # a runtime-checkable Protocol

    def of(self, store: object) -> _C | None:
        """``store`` itself when it implements the protocol, else None."""
        return cast(_C, store) if isinstance(store, self.protocol) else None

    def __repr__(self) -> str:
        return f"Capability({self.protocol.__name__})"


NATS_BACKED: Capability[NatsBackedStore] = Capability(NatsBackedStore)
LOCKABLE: Capability[LockableStore] = Capability(LockableStore)
REPLICATED: Capability[ReplicatedStore] = Capability(ReplicatedStore)
HANDS_OVER: Capability[HandingOverStore] = Capability(HandingOverStore)
PIPELINES_WRITES: Capability[PipeliningStore] = Capability(PipeliningStore)
ADOPTS: Capability[AdoptingStore] = Capability(AdoptingStore)
DEDUPLICATES: Capability[DeduplicatingMessages] = Capability(DeduplicatingMessages)
BEGINS_FLUSH: Capability[PipeliningMessages] = Capability(PipeliningMessages)
LOCATES: Capability[LocatingMessages] = Capability(LocatingMessages)


class Store(ABC):
    """The whole store: server info, clients, channels."""

    #: What the startup log prints after ``Message store is``.
    type_name: str = ""

    @abstractmethod
    def recover(self) -> RecoveredState | None:
        """Load persisted state; None for a fresh (or memory) store.

        Recovered channels are already created (they count towards ``max_channels``);
        their subscription stores know every recovered ID (see ``note_id``). Count and
        size limits and age expiry are applied before returning (filestore.md §10.1).
        """

    @abstractmethod
    def init(self, info: ServerInfo) -> None:
        """Persist the server information (first start, or a rewrite)."""

    @abstractmethod
    def add_client(self, record: ClientRecord) -> None:
        """Persist a registered client (replacing one with the same ID)."""

    @abstractmethod
    def delete_client(self, client_id: str) -> None:
        """Forget a client."""

    @abstractmethod
    def create_channel(self, name: str) -> ChannelStore:
        """Create the stores of a new channel with its limits. Raises
        ``StoreError(TOO_MANY_CHANNELS)`` when ``max_channels`` is reached."""

    @abstractmethod
    def delete_channel(self, name: str) -> None:
        """Remove a channel and everything it holds."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release everything."""

    def capability(self, kind: Capability[_C]) -> _C | None:
        """This store as ``kind`` (see :class:`Capability`), or None when it does not
        have that capability. A wrapper answers for the store it wraps."""
        return kind.of(self)


class BaseStore(Store):
    """Channel bookkeeping and the ``max_channels`` limit, shared by implementations."""

    def __init__(self, limits: StoreLimits, log: StoreLog) -> None:
        self.limits = limits
        self.log = log
        self.channels: dict[str, ChannelStore] = {}

    def create_channel(self, name: str) -> ChannelStore:
        existing = self.channels.get(name)
        if existing is not None:
            return existing
        max_channels = self.limits.max_channels
        if max_channels > 0 and len(self.channels) >= max_channels:
            raise StoreError(TOO_MANY_CHANNELS)
        channel = self._new_channel(name, self.limits.for_channel(name))
        self.channels[name] = channel
        return channel

    def delete_channel(self, name: str) -> None:
        channel = self.channels.pop(name, None)
        if channel is not None:
            channel.msgs.close()
            channel.subs.close()
            self._remove_channel(name)

    def close(self) -> None:
        for channel in self.channels.values():
            channel.msgs.close()
            channel.subs.close()
        self.channels.clear()

    @abstractmethod
    def _new_channel(self, name: str, limits: Limits) -> ChannelStore:
        """Create the channel's stores (its limits already resolved)."""

    def _remove_channel(self, name: str) -> None:
        """Hook: delete the channel's persisted data."""
