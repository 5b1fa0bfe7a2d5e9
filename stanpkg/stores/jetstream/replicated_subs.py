"""A channel's subscriptions in the clustered store: served from memory, each one's record
and pending sequences replicated as one record of the cluster's map (``record_codec``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from stanpkg.stores.base import SubRecord, SubscriptionStore
from stanpkg.stores.jetstream.layout import sub_key
from stanpkg.stores.jetstream.record_codec import subscription_record
from stanpkg.stores.jetstream.records_map import ReplicatedMap

__all__ = ["ReplicatedSubscriptions"]


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
        # The store's: told the channel's name when a position first changes since the
        # last write_changed (the channels to visit, instead of all of them).
        self.on_change: Callable[[str], None] | None = None

    def restore(self, record: SubRecord, pending: list[int]) -> None:
        note = getattr(self.cache, "note_id", None)
        if note is not None:
            note(record.id, True)
        self.tracked[record.id] = _Tracked(record.copy(), set(pending))

    def _write(self, sub_id: int) -> None:
        tracked = self.tracked.get(sub_id)
        if tracked is None:
            return
        self._state.put(*subscription_record(self._channel, tracked.record, tracked.pending))

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
        self._state.delete(sub_key(self._channel, sub_id))

    def record_sent(self, sub_id: int, sequences: Sequence[int]) -> None:
        tracked = self.tracked.get(sub_id)
        if tracked is None or not sequences:
            return
        tracked.pending.update(sequences)
        tracked.record.last_sent = max(tracked.record.last_sent, sequences[-1])
        self._note(sub_id)

    def record_ack(self, sub_id: int, sequence: int) -> None:
        tracked = self.tracked.get(sub_id)
        if tracked is not None:
            tracked.pending.discard(sequence)
            self._note(sub_id)

    def _note(self, sub_id: int) -> None:
        if not self._changed and self.on_change is not None:
            self.on_change(self._channel)
        self._changed.add(sub_id)

    def write_changed(self) -> None:
        changed, self._changed = self._changed, set()
        for sub_id in changed:
            self._write(sub_id)

    async def flush(self) -> None:
        await self._state.flush()

    def close(self) -> None:
        self.cache.close()
