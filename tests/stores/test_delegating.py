"""The delegating bases of store wrappers (stores/delegating.py) forward every method and
property of the store interface to the inner store, capabilities included: a method added
to the interface and not forwarded there fails here, instead of a wrapper silently
running the interface's default."""

from __future__ import annotations

import asyncio
import inspect
from abc import abstractmethod
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

from stanpkg.plan.limits import DEFAULT_LIMITS, Limits, StoreLimits
from stanpkg.stores.base import (
    ADOPTS,
    BEGINS_FLUSH,
    DEDUPLICATES,
    LOCATES,
    LOCKABLE,
    NATS_BACKED,
    PIPELINES_WRITES,
    REPLICATED,
    ChannelStore,
    DeduplicatingMessages,
    LocatingMessages,
    LockableStore,
    MessageStore,
    NatsBackedStore,
    PipeliningMessages,
    PipeliningStore,
    ReplicatedStore,
    Store,
    StoreError,
    SubscriptionStore,
)
from stanpkg.stores.delegating import (
    DelegatingMessageStore,
    DelegatingStore,
    DelegatingSubscriptionStore,
)
from stanpkg.stores.encryption import EncryptingStore
from stanpkg.stores.file import FileStore
from stanpkg.stores.file.messages import FileMessageStore
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.store import ClusteredStore
from stanpkg.stores.memory import MemoryStore
from stanpkg.stores.sql.store import SqlStore
from tests.stores.file.helpers import LogCapture

PAIRS: list[tuple[type[Any], type[Any]]] = [
    (Store, DelegatingStore),
    (MessageStore, DelegatingMessageStore),
    (SubscriptionStore, DelegatingSubscriptionStore),
]
IDS = [interface.__name__ for interface, _ in PAIRS]


def _members(interface: type[Any]) -> dict[str, Any]:
    """The interface's public methods and properties, its defaults included."""
    found: dict[str, Any] = {}
    for cls in reversed(interface.__mro__[:-1]):  # without object
        for name, value in vars(cls).items():
            if not name.startswith("_") and (callable(value) or isinstance(value, property)):
                found[name] = value
    return found


def _attributes(interface: type[Any]) -> set[str]:
    """The interface's public plain attributes (declared or with a class value)."""
    found: set[str] = set()
    for cls in interface.__mro__[:-1]:
        found.update(n for n in vars(cls).get("__annotations__", {}) if not n.startswith("_"))
        found.update(
            name
            for name, value in vars(cls).items()
            if not name.startswith("_") and not callable(value) and not isinstance(value, property)
        )
    return found


def _unforwarded(interface: type[Any], delegating: type[Any]) -> set[str]:
    """What the delegating class leaves to the interface (its default, or abstract)."""
    return {name for name in _members(interface) if name not in vars(delegating)}


@pytest.mark.parametrize(("interface", "delegating"), PAIRS, ids=IDS)
def test_every_method_and_property_is_defined_by_the_delegating_base(
    interface: type[Any], delegating: type[Any]
) -> None:
    missing = _unforwarded(interface, delegating)
    assert missing == set(), f"{delegating.__name__} does not forward {sorted(missing)}"


def test_the_check_notices_a_method_added_to_the_interface() -> None:
    class Wider(MessageStore):
        @abstractmethod
        def new_method(self) -> None:
            """A method a future interface may add."""

    assert _unforwarded(Wider, DelegatingMessageStore) == {"new_method"}


def _arguments(method: Callable[..., Any]) -> list[object]:
    if method.__name__ == "capability":
        return [LOCKABLE]  # one the wrapper does not have itself
    parameters = list(inspect.signature(method).parameters.values())[1:]  # without self
    return [object() for p in parameters if p.default is inspect.Parameter.empty]


@pytest.mark.parametrize(("interface", "delegating"), PAIRS, ids=IDS)
def test_every_call_reaches_the_inner_store(interface: type[Any], delegating: type[Any]) -> None:
    inner = mock.MagicMock(spec=interface)
    for name in _attributes(interface):
        setattr(inner, name, object())
    wrapper = delegating(inner)
    for name in _attributes(interface):
        assert getattr(wrapper, name) is getattr(inner, name), name
    for name, member in _members(interface).items():
        if isinstance(member, property):
            assert getattr(wrapper, name) is getattr(inner, name), name
            continue
        args = _arguments(member)
        result = getattr(wrapper, name)(*args)
        target = getattr(inner, name)
        if inspect.iscoroutinefunction(member):
            asyncio.run(result)
            target.assert_awaited_once_with(*args)
        else:
            target.assert_called_once_with(*args)
            if inspect.signature(member).return_annotation != "None":
                assert result is target.return_value, name


class _LockedMemory(MemoryStore):
    """A memory store with a lock: a capability found by its methods alone."""

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        return True


LIMITS = StoreLimits(max_channels=0, defaults=DEFAULT_LIMITS, channels=())


def test_capabilities_of_the_stores() -> None:
    memory = MemoryStore(LIMITS, LogCapture())
    assert memory.capability(NATS_BACKED) is None
    assert memory.capability(LOCKABLE) is None
    assert memory.capability(REPLICATED) is None
    locked = _LockedMemory(LIMITS, LogCapture())
    assert locked.capability(LOCKABLE) is locked and locked.capability(REPLICATED) is None
    assert issubclass(FileStore, LockableStore) and issubclass(SqlStore, LockableStore)
    for protocol in (NatsBackedStore, LockableStore, ReplicatedStore):
        assert issubclass(ClusteredStore, protocol)


def test_a_wrapper_answers_with_the_inner_stores_capabilities() -> None:
    locked = _LockedMemory(LIMITS, LogCapture())
    wrapper = EncryptingStore(locked, b"key", 1, LogCapture())
    assert wrapper.capability(LOCKABLE) is locked
    assert wrapper.capability(NATS_BACKED) is None and wrapper.capability(REPLICATED) is None
    plain = EncryptingStore(MemoryStore(LIMITS, LogCapture()), b"key", 1, LogCapture())
    assert plain.capability(LOCKABLE) is None


class _PipeliningMessages(DelegatingMessageStore, DeduplicatingMessages, PipeliningMessages):
    """A memory channel's messages with the clustered store's message capabilities."""

    def __init__(self, inner: MessageStore) -> None:
        super().__init__(inner)
        self.fail = False
        self.flushes = 0

    def has_guid(self, guid: str) -> bool:
        return guid == "seen"

    def begin_flush(self) -> asyncio.Future[None]:
        self.flushes += 1
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.fail:
            done.set_exception(StoreError("write failed"))
        else:
            done.set_result(None)
        return done


class _PipeliningMemory(MemoryStore, PipeliningStore):
    """A memory store declaring the clustered store's pipelined writes."""

    pipelines_writes = True

    def _new_channel(self, name: str, limits: Limits) -> ChannelStore:
        plain = super()._new_channel(name, limits)
        return ChannelStore(name, _PipeliningMessages(plain.msgs), plain.subs, limits)


def test_capabilities_of_the_message_stores() -> None:
    memory = MemoryStore(LIMITS, LogCapture())
    assert memory.capability(PIPELINES_WRITES) is None and memory.capability(ADOPTS) is None
    msgs = memory.create_channel("foo").msgs
    for kind in (DEDUPLICATES, BEGINS_FLUSH, LOCATES):
        assert msgs.capability(kind) is None, kind
    assert issubclass(FileMessageStore, LocatingMessages)
    assert issubclass(ReplicatedMessages, DeduplicatingMessages)
    assert issubclass(ReplicatedMessages, PipeliningMessages)
    assert PipeliningStore in ClusteredStore.__mro__ and ClusteredStore.pipelines_writes


def test_the_encrypting_wrapper_passes_message_capabilities_through() -> None:
    inner = _PipeliningMemory(LIMITS, LogCapture())
    wrapper = EncryptingStore(inner, b"key", 1, LogCapture())
    assert wrapper.capability(PIPELINES_WRITES) is inner
    assert wrapper.capability(ADOPTS) is wrapper  # it wraps the channels it serves
    msgs = wrapper.create_channel("foo").msgs
    assert isinstance(msgs, DelegatingMessageStore)
    pipelining = inner.channels["foo"].msgs
    assert msgs.capability(DEDUPLICATES) is pipelining  # publish IDs are not encrypted
    starting = msgs.capability(BEGINS_FLUSH)
    assert starting is msgs  # the wrapper's own: it drops plaintext when a write fails
    assert msgs.capability(LOCATES) is None

    async def scenario() -> None:
        assert isinstance(pipelining, _PipeliningMessages)
        await starting.begin_flush()
        pipelining.fail = True
        with pytest.raises(StoreError, match="write failed"):
            await msgs.flush()
        assert pipelining.flushes == 2

    asyncio.run(scenario())
    plain = EncryptingStore(MemoryStore(LIMITS, LogCapture()), b"key", 1, LogCapture())
    assert plain.capability(PIPELINES_WRITES) is None
    assert plain.create_channel("foo").msgs.capability(BEGINS_FLUSH) is None
