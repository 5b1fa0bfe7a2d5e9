"""Bases for a store that wraps another (the encrypting store): every method and property
of the store interface forwarded to ``inner``, :meth:`Store.capability` included, so a
wrapper overrides only what it changes and never falls back to one of the interface's
defaults by forgetting a method (tests/stores/test_delegating.py checks that each of the
interface's methods is forwarded here).

The interface's plain attributes (``limits``, ``type_name``) are constants of the inner
store, copied when the wrapper is made. A capability the wrapper does not implement
itself is the inner store's (what the wrapper does not change, such as a lock or the
publish IDs a message store remembers); a wrapper that changes what a capability does
implements it (as the encrypting message store does ``begin_flush``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from stanpkg.stores.base import (
    Capability,
    ChannelStore,
    ClientRecord,
    MessageBatch,
    MessageStore,
    RecoveredState,
    ServerInfo,
    Store,
    StoredRun,
    SubRecord,
    SubscriptionStore,
)

__all__ = ["DelegatingMessageStore", "DelegatingStore", "DelegatingSubscriptionStore"]

_C = TypeVar("_C")


class DelegatingMessageStore(MessageStore):
    """A :class:`MessageStore` doing what ``inner`` does."""

    def __init__(self, inner: MessageStore) -> None:
        self.inner = inner
        self.limits = inner.limits

    @property
    def first_sequence(self) -> int:
        return self.inner.first_sequence

    @property
    def last_sequence(self) -> int:
        return self.inner.last_sequence

    @property
    def last_timestamp(self) -> int:
        return self.inner.last_timestamp

    def state(self) -> tuple[int, int]:
        return self.inner.state()

    def store(self, batch: MessageBatch) -> StoredRun:
        return self.inner.store(batch)

    def lookup(self, sequence: int) -> bytes | None:
        return self.inner.lookup(sequence)

    def lookup_run(self, first: int, last: int) -> list[bytes | None]:
        return self.inner.lookup_run(first, last)

    def sequence_at_or_after(self, timestamp: int) -> int:
        return self.inner.sequence_at_or_after(timestamp)

    def readable_until(self, first: int, last: int) -> int:
        return self.inner.readable_until(first, last)

    async def find_time(self, timestamp: int) -> None:
        await self.inner.find_time(timestamp)

    @property
    def loading(self) -> bool:
        return self.inner.loading

    async def wait_loaded(self) -> None:
        await self.inner.wait_loaded()

    @property
    def on_readable(self) -> Callable[[], None] | None:
        return self.inner.on_readable

    @on_readable.setter
    def on_readable(self, hook: Callable[[], None] | None) -> None:
        self.inner.on_readable = hook

    def expire(self, now: int) -> int:
        return self.inner.expire(now)

    async def flush(self) -> None:
        await self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def capability(self, kind: Capability[_C]) -> _C | None:
        """The wrapper itself when it implements the capability, else the inner message
        store's."""
        own = kind.of(self)
        return own if own is not None else self.inner.capability(kind)


class DelegatingSubscriptionStore(SubscriptionStore):
    """A :class:`SubscriptionStore` doing what ``inner`` does."""

    def __init__(self, inner: SubscriptionStore) -> None:
        self.inner = inner

    def create(self, record: SubRecord) -> None:
        self.inner.create(record)

    def update(self, record: SubRecord) -> None:
        self.inner.update(record)

    def delete(self, sub_id: int) -> None:
        self.inner.delete(sub_id)

    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        self.inner.record_sent(sub_id, sequences)

    def record_ack(self, sub_id: int, sequence: int) -> None:
        self.inner.record_ack(sub_id, sequence)

    async def flush(self) -> None:
        await self.inner.flush()

    def close(self) -> None:
        self.inner.close()


class DelegatingStore(Store):
    """A :class:`Store` doing what ``inner`` does; its channels are the inner store's
    (a wrapper of channels overrides the channel methods)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.type_name = inner.type_name

    def recover(self) -> RecoveredState | None:
        return self.inner.recover()

    def init(self, info: ServerInfo) -> None:
        self.inner.init(info)

    def add_client(self, record: ClientRecord) -> None:
        self.inner.add_client(record)

    def delete_client(self, client_id: str) -> None:
        self.inner.delete_client(client_id)

    def create_channel(self, name: str) -> ChannelStore:
        return self.inner.create_channel(name)

    def delete_channel(self, name: str) -> None:
        self.inner.delete_channel(name)

    def close(self) -> None:
        self.inner.close()

    def capability(self, kind: Capability[_C]) -> _C | None:
        """The wrapper itself when it implements the capability, else the inner store's
        (what the wrapper does not change, such as a lock, is the inner store's)."""
        own = kind.of(self)
        return own if own is not None else self.inner.capability(kind)
