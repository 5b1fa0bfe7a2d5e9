"""The MEMORY store on its own: segments, limits, lookups, expiry, ID assignment."""

from __future__ import annotations

import pytest

from stanpkg.plan.limits import DEFAULT_LIMITS, Limits, StoreLimits
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.log import Logger
from stanpkg.stores.base import (
    TOO_MANY_CHANNELS,
    TOO_MANY_SUBS,
    MessageBatch,
    StoredRun,
    StoreError,
    SubRecord,
)
from stanpkg.stores.memory import MAX_SEGMENT_BYTES, MemoryMessageStore, MemoryStore
from tests.server.conftest import LogCapture


def _limits(**values: int) -> Limits:
    fields = {"max_subs": 0, "max_msgs": 0, "max_bytes": 0, "max_age": 0, "max_inactivity": 0}
    fields.update(values)
    return Limits(**fields)


def _store(**limits: int) -> tuple[MemoryMessageStore, LogCapture]:
    capture = LogCapture()
    return MemoryMessageStore("ch", _limits(**limits), Logger(stream=capture)), capture


def _record(seq: int, size: int = 100, stamp: int = 0) -> bytes:
    return pb.MsgProto(
        sequence=seq, subject="ch", data=b"x" * size, timestamp=stamp
    ).SerializeToString()


def _messages(count: int, size: int = 100) -> list[tuple[str, bytes]]:
    """The (reply, data) of ``count`` messages, as :func:`_record` has them."""
    return [("", b"x" * size)] * count


def _fill(store: MemoryMessageStore, count: int, size: int = 100, stamp0: int = 1000) -> None:
    """``count`` messages in batches of 1000, each stamped ``stamp0 + its first sequence``."""
    first = store.last_sequence + 1
    for start in range(first, first + count, 1000):
        end = min(start + 1000, first + count)
        run = store.store(MessageBatch(stamp0 + start, _messages(end - start, size)))
        assert run == StoredRun(start, end - 1)


def test_empty_store() -> None:
    store, _ = _store()
    assert (store.first_sequence, store.last_sequence, store.last_timestamp) == (0, 0, 0)
    assert store.state() == (0, 0)
    assert store.lookup(1) is None
    assert store.sequence_at_or_after(0) == 0


def test_lookups_across_many_segments() -> None:
    store, _ = _store()
    _fill(store, 30_000, size=150)  # several MB: many segments
    assert store.state()[0] == 30_000
    assert len(store._segments) > 4
    for seq in (1, 2, 999, 1000, 1001, 12_345, 29_999, 30_000):
        record = store.lookup(seq)
        assert record is not None and pb.MsgProto.FromString(record).sequence == seq
    assert store.lookup(0) is None and store.lookup(30_001) is None


@pytest.mark.parametrize(
    "run",
    [(1, 1), (1, 30_000), (998, 1_003), (12_000, 20_000), (29_000, 30_000), (29_990, 30_005)],
)
def test_lookup_run_is_lookup_of_each_sequence(run: tuple[int, int]) -> None:
    store, _ = _store()
    _fill(store, 30_000, size=150)  # the newest batch is served from memory, others copied
    first, last = run
    assert store.lookup_run(first, last) == [store.lookup(s) for s in range(first, last + 1)]


def test_lookup_run_after_old_messages_were_dropped() -> None:
    store, _ = _store(max_msgs=2_500)
    _fill(store, 5_000)
    assert store.first_sequence == 2_501
    assert store.lookup_run(2_400, 2_600) == [store.lookup(s) for s in range(2_400, 2_601)]
    assert store.lookup_run(2_400, 2_600)[:101] == [None] * 101


def test_big_records_get_their_own_segment() -> None:
    store, _ = _store()
    big = _record(1, size=MAX_SEGMENT_BYTES + 10)
    store.store(MessageBatch(0, [*_messages(1, MAX_SEGMENT_BYTES + 10), *_messages(1)]))
    assert store.lookup(1) == big
    assert pb.MsgProto.FromString(store.lookup(2) or b"").sequence == 2


def test_max_msgs_and_warning_once() -> None:
    store, log = _store(max_msgs=10)
    _fill(store, 25)
    assert (store.first_sequence, store.last_sequence, store.state()[0]) == (16, 25, 10)
    assert store.lookup(15) is None and store.lookup(16) is not None
    assert log.getvalue().count("Reached limits") == 1


def test_max_bytes_keeps_the_newest() -> None:
    store, _ = _store(max_bytes=1000)
    _fill(store, 50, size=100)
    count, size = store.state()
    assert size <= 1000 and store.last_sequence == 50 and count == size // len(_record(1))
    store.store(MessageBatch(1, _messages(1, size=5000)))
    assert store.state()[0] == 1 and store.first_sequence == 51


def test_segments_are_released_as_messages_go() -> None:
    store, _ = _store(max_msgs=1000)
    _fill(store, 50_000, size=150)
    assert store.state()[0] == 1000
    assert len(store._segments) <= 3


def test_expire_and_first_after_everything_expired() -> None:
    store, _ = _store(max_age=100)
    for stamp in (1000, 1050, 1200):  # one batch each
        store.store(MessageBatch(stamp, _messages(1)))
    assert store.expire(1150) == 1200  # 1 and 2 are at least 100 old
    assert store.first_sequence == 3
    assert store.expire(1300) == 0
    assert (store.first_sequence, store.last_sequence, store.state()) == (4, 3, (0, 0))
    assert store.sequence_at_or_after(0) == 4
    assert store.store(MessageBatch(2000, _messages(1))) == StoredRun(4, 4)
    assert (store.first_sequence, store.last_sequence) == (4, 4)


def test_sequence_at_or_after() -> None:
    store, _ = _store()
    for stamp, count in ((10, 1), (20, 2), (30, 1), (40, 1)):  # 1, 2-3, 4, 5
        store.store(MessageBatch(stamp, _messages(count)))
    assert [store.sequence_at_or_after(t) for t in (0, 10, 15, 20, 35, 40, 41)] == [
        1,
        1,
        2,
        2,
        5,
        5,
        6,
    ]


def test_timestamps_shared_by_batches_across_segments_and_dropped_messages() -> None:
    """A batch shares one timestamp (stored once per run): every message's timestamp and
    every start-at-time lookup agree with a plain list, across segments, with a batch
    split by a new segment, and after the oldest messages were dropped."""
    store, _ = _store(max_msgs=25_000)
    stamps: dict[int, int] = {}
    seq, stamp = 0, 1_000
    for batch in range(120):
        count = 1 + (batch * 37) % 500
        stamp += 0 if batch % 7 == 3 else 1 + batch % 5  # some batches share a time
        seqs = range(seq + 1, seq + count + 1)
        assert store.store(MessageBatch(stamp, _messages(count, 150))) == (seqs[0], seqs[-1])
        stamps.update(dict.fromkeys(seqs, stamp))
        seq += count
    assert len(store._segments) > 2
    first, last = store.first_sequence, store.last_sequence
    assert first > 1  # the oldest were dropped
    live = {s: t for s, t in stamps.items() if s >= first}
    assert all(store.timestamp(s) == t for s, t in live.items())
    for wanted in range(0, stamp + 2):
        expected = next((s for s in range(first, last + 1) if live[s] >= wanted), last + 1)
        assert store.sequence_at_or_after(wanted) == expected, wanted


def test_subscription_ids_and_max_subs() -> None:
    limits = StoreLimits(max_channels=2, defaults=_limits(max_subs=2), channels=())
    store = MemoryStore(limits, Logger(stream=LogCapture()))
    channel = store.create_channel("a")
    assert store.create_channel("a") is channel
    store.create_channel("b")
    with pytest.raises(StoreError, match=TOO_MANY_CHANNELS):
        store.create_channel("c")
    records = [SubRecord("c", "i", f"ack{i}", 1, 1) for i in range(3)]
    channel.subs.create(records[0])
    channel.subs.create(records[1])
    with pytest.raises(StoreError, match=TOO_MANY_SUBS):
        channel.subs.create(records[2])
    channel.subs.delete(records[0].id)
    channel.subs.create(records[2])
    assert [r.id for r in records] == [1, 2, 3]  # IDs are never reused
    store.delete_channel("b")
    store.create_channel("c")


def test_default_limits_are_used_for_unlisted_channels() -> None:
    limits = StoreLimits(max_channels=100, defaults=DEFAULT_LIMITS, channels=())
    store = MemoryStore(limits, Logger(stream=LogCapture()))
    assert store.create_channel("x").limits == DEFAULT_LIMITS
