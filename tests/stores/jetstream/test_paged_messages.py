"""PagedMessages on its own (stores/jetstream/paged_messages.py): the pages, their bound,
what is readable and when, merging a read with writes that came meanwhile, gone messages,
limits and the search by time. The reader here serves a list of messages, as the
channel's subject would (test_on_demand.py reads a real JetStream)."""

from __future__ import annotations

import asyncio

from stanpkg.plan.limits import Limits
from stanpkg.server.log import Logger
from stanpkg.stores.jetstream.paged_messages import PAGE, PageCache, PagedMessages, ReadMessage
from tests.server.conftest import LogCapture


def _record(seq: int) -> bytes:
    return f"r{seq}".encode().ljust(20, b".")


class Stream:
    """The channel's subject: messages by sequence, a read counter, and a gate that holds
    reads while the test writes."""

    def __init__(self, last: int, gone: set[int] | None = None) -> None:
        self.messages = {
            seq: ReadMessage(seq, 1000 + seq, _record(seq), seq * 10, f"g{seq}")
            for seq in range(1, last + 1)
            if seq not in (gone or set())
        }
        self.reads: list[tuple[int, int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def read(self, first: int, last: int) -> list[ReadMessage]:
        self.reads.append((first, last))
        await self.gate.wait()
        return [self.messages[s] for s in range(first, last + 1) if s in self.messages]


def _paged(
    stream: Stream, budget: int = 10**9, limits: Limits | None = None
) -> tuple[PagedMessages, PageCache]:
    cache = PageCache(budget)
    limits = limits or Limits(max_msgs=0, max_bytes=0, max_age=0, max_subs=0, max_inactivity=0)
    log = Logger(stream=LogCapture(), debug=False, trace=False)
    return PagedMessages("ch", limits, log, cache, stream.read), cache


async def test_restored_messages_are_read_a_page_at_a_time() -> None:
    stream = Stream(1000)
    msgs, _ = _paged(stream)
    msgs.restore(1, 1000, 20 * 1000, 10_000)
    fed: list[int] = []
    msgs.on_readable = lambda: fed.append(1)
    assert msgs.readable_until(1, 1000) == 0
    assert msgs.lookup(1) is None and msgs.lookup_run(1, 2) == [None, None]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert stream.reads == [(1, PAGE)] and fed == [1]
    assert msgs.readable_until(1, 1000) == PAGE
    assert msgs.lookup_run(PAGE - 1, PAGE) == [_record(PAGE - 1), _record(PAGE)]
    await msgs.load(1, 1000)
    assert msgs.readable_until(1, 1000) == 1000
    assert msgs.lookup_run(999, 1001) == [_record(999), _record(1000), None]


async def test_writes_during_a_read_are_kept_and_the_page_is_whole() -> None:
    stream = Stream(300)
    msgs, _ = _paged(stream)
    msgs.restore(1, 300, 20 * 300, 3000)
    stream.gate.clear()
    assert msgs.readable_until(257, 300) == 256
    await asyncio.sleep(0)
    msgs.append_records([_record(301), _record(302)], [3010, 3020])  # while reading
    stream.gate.set()
    await msgs.load(257, 302)
    assert msgs.readable_until(257, 302) == 302
    assert msgs.lookup_run(299, 302) == [_record(s) for s in (299, 300, 301, 302)]


async def test_a_message_the_stream_lacks_is_gone_not_missing() -> None:
    stream = Stream(10, gone={4})
    msgs, _ = _paged(stream)
    msgs.restore(1, 10, 200, 100)
    await msgs.load(1, 10)
    assert msgs.readable_until(1, 10) == 10
    assert msgs.lookup(4) is None and msgs.lookup(5) == _record(5)


async def test_pages_are_let_go_past_the_bound_and_read_again() -> None:
    stream = Stream(0)
    msgs, cache = _paged(stream, budget=3 * PAGE * 90)
    for start in range(1, 5 * PAGE, 100):
        batch = list(range(start, min(5 * PAGE, start + 99) + 1))
        for seq in batch:
            stream.messages[seq] = ReadMessage(seq, 1000 + seq, _record(seq), seq * 10)
        msgs.append_records([_record(s) for s in batch], [s * 10 for s in batch])
    assert msgs.last_sequence == 5 * PAGE and cache.size <= cache.budget
    assert msgs.readable_until(1, 10) == 0  # the oldest went first
    assert msgs.readable_until(4 * PAGE + 1, 5 * PAGE) == 5 * PAGE
    await msgs.load(1, 10)
    assert msgs.lookup(1) == _record(1) and cache.size <= cache.budget


async def test_limits_read_the_oldest_page_when_it_is_not_in_memory() -> None:
    stream = Stream(100)
    limits = Limits(max_msgs=100, max_bytes=0, max_age=0, max_subs=0, max_inactivity=0)
    msgs, _ = _paged(stream, limits=limits)
    msgs.restore(1, 100, 20 * 100, 1000)
    trimmed: list[int] = []
    msgs.on_trimmed = lambda: trimmed.append(msgs.first_sequence)
    stream.messages[101] = ReadMessage(101, 1101, _record(101), 1010)
    msgs.append_records([_record(101)], [1010])
    assert msgs.first_sequence == 1  # the oldest page is being read
    await msgs.load(1, 1)
    assert msgs.first_sequence == 2 and msgs.state() == (100, 20 * 100) and trimmed == [2]


async def test_expiry_waits_for_the_oldest_page() -> None:
    stream = Stream(5)
    limits = Limits(max_msgs=0, max_bytes=0, max_age=25, max_subs=0, max_inactivity=0)
    msgs, _ = _paged(stream, limits=limits)
    msgs.restore(1, 5, 100, 50)
    assert msgs.expire(60) > 60 - 25  # asks again soon, once the page is read
    await msgs.load(1, 1)
    assert msgs.expire(60) == 40 and msgs.first_sequence == 4  # stamps 10..30 gone


async def test_the_search_by_time_reads_the_pages_it_needs() -> None:
    stream = Stream(5 * PAGE)
    msgs, _ = _paged(stream)
    msgs.restore(1, 5 * PAGE, 20 * 5 * PAGE, 50 * PAGE)
    target = 3 * PAGE + 7
    await msgs.find_time(target * 10 - 5)
    assert msgs.sequence_at_or_after(target * 10 - 5) == target
    assert len(stream.reads) <= 4  # a binary search over 5 pages
    await msgs.find_time(10**9)
    assert msgs.sequence_at_or_after(10**9) == 5 * PAGE + 1
