"""A channel's messages as the serving node keeps them: its figures always (first and
last sequence, count, bytes), its messages only in pages, read from the channel's
subject on demand and kept within one bound shared by every channel (:class:`PageCache`).

Why: the stream has every message on a quorum already. Holding them all in the serving
node's memory made a promotion read every stored message before serving (a minute for a
million) and made the node's memory grow with what is stored. Here a promotion reads
each channel's figures only, and what a subscription needs is read when it needs it.

Pages hold ``PAGE`` consecutive sequences (page ``n``: ``n * PAGE + 1`` to ``(n + 1) *
PAGE``), filled by writes as they are acknowledged and by reads of the stream. A
sequence within ``first..last`` that the stream no longer has (never expected: a channel
is dense) is held as ``None``: gone, as in every store.

The limits (max_msgs, max_bytes, max_age) drop the oldest messages, as the memory store
does; dropping needs the oldest page (sizes, timestamps). When it is not in memory it
is read first and the limits applied once it is there: a few milliseconds late, once.
"""

from __future__ import annotations

import asyncio
import itertools
from array import array
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from stanpkg.plan.limits import Limits
from stanpkg.stores.base import SequenceBookkeeping, StoreError, StoreLog
from stanpkg.stores.limit_policy import LimitsWarning, drops_oldest, expired, over_count_or_size

__all__ = ["PAGE", "PageCache", "PagedMessages", "ReadMessage"]

PAGE = 256  # messages per page: one batched direct get reads one
RECORD_OVERHEAD = 64  # bytes a kept record costs beyond its own (object, list slot)
_owners = itertools.count(1)
_ZEROS = array("q", bytes(8 * PAGE))  # unknown stream sequences, a page's worth
RETRY_AFTER_FAILURE = 0.25  # seconds before a failed read is asked for again
AGE_RECHECK_NS = 50_000_000  # the age timer fires again this soon while the head loads


class ReadMessage(NamedTuple):
    """A message read from the channel's subject: STAN sequence, stream sequence, the
    serialized MsgProto, its timestamp (ns) and publish ID."""

    sequence: int
    stream_seq: int
    record: bytes
    timestamp: int
    guid: str = ""


# Reads the channel's messages first..last from its stream, in order (some may be gone).
Reader = Callable[[int, int], Awaitable[list[ReadMessage]]]


class _Page:
    """Consecutive sequences from ``first``; a record is None when the message is gone."""

    __slots__ = ("first", "records", "size", "stamps", "stream_seqs")

    def __init__(self, first: int) -> None:
        self.first = first
        self.records: list[bytes | None] = []
        self.stamps = array("q")
        self.stream_seqs = array("q")  # 0 where not known (written, answer not kept)
        self.size = 0  # what it costs the cache

    @property
    def end(self) -> int:
        """The sequence after the page's last."""
        return self.first + len(self.records)

    def add(self, record: bytes | None, stamp: int, stream_seq: int) -> int:
        self.records.append(record)
        self.stamps.append(stamp)
        self.stream_seqs.append(stream_seq)
        cost = RECORD_OVERHEAD + (len(record) if record is not None else 0)
        self.size += cost
        return cost


class PageCache:
    """The pages of every channel of the store, the least recently used dropped once
    they cost more than ``budget`` bytes (a dropped page is read again when needed)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._pages: OrderedDict[tuple[int, int], _Page] = OrderedDict()

    def get(self, owner: int, number: int) -> _Page | None:
        key = (owner, number)
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
        return page

    def peek(self, owner: int, number: int) -> _Page | None:
        """The page without counting it as used."""
        return self._pages.get((owner, number))

    def put(self, owner: int, number: int, page: _Page) -> None:
        key = (owner, number)
        old = self._pages.pop(key, None)
        if old is not None:
            self.size -= old.size
        self._pages[key] = page
        self.size += page.size

    def grew(self, cost: int) -> None:
        self.size += cost

    def drop(self, owner: int, number: int) -> None:
        page = self._pages.pop((owner, number), None)
        if page is not None:
            self.size -= page.size

    def trim(self) -> None:
        pages = self._pages
        while self.size > self.budget and len(pages) > 1:
            _, page = pages.popitem(last=False)
            self.size -= page.size

    def __len__(self) -> int:
        return len(self._pages)


def _number(sequence: int) -> int:
    return (sequence - 1) // PAGE


class PagedMessages(SequenceBookkeeping):
    """One channel: its figures, and its messages in ``cache``'s pages, read with
    ``read`` when missing. The surface the clustered message store uses (the memory
    store's, plus :meth:`readable_until` and the figures of a promotion)."""

    def __init__(
        self, channel: str, limits: Limits, log: StoreLog, cache: PageCache, read: Reader
    ) -> None:
        self.channel = channel
        self.limits = limits
        self._log = log
        self._cache = cache
        self._owner = next(_owners)  # never reused, unlike id()
        self._read = read
        self._first = 0
        self._last = 0
        self._last_ts = 0
        self._count = 0
        self._bytes = 0
        self._limits_warning = LimitsWarning(log, channel)
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._failed_reads = 0
        # Called when messages that were asked for and missing became readable.
        self.on_readable: Callable[[], None] | None = None
        # Called when the limits dropped messages later than the call that exceeded them.
        self.on_trimmed: Callable[[], None] | None = None

    # -- figures ------------------------------------------------------------------------

    def state(self) -> tuple[int, int]:
        return self._count, self._bytes

    def start_after(self, sequence: int) -> None:
        """An empty channel whose next message gets ``sequence + 1``."""
        if self._count or self._last:
            raise StoreError("start_after needs an empty store")
        self._first = self._last = sequence
        if sequence:
            self._first = sequence + 1

    def restore(self, first: int, last: int, size: int, last_timestamp: int) -> None:
        """The figures of a channel whose messages first..last (``size`` bytes) are in
        its stream and not read: a promotion."""
        if self._count or self._last:
            raise StoreError("restore needs an empty store")
        self._first, self._last, self._last_ts = first, last, last_timestamp
        self._count = last - first + 1 if first and last >= first else 0
        self._bytes = size if self._count else 0
        if not self._count and last:
            self._first = last + 1

    # -- writing ------------------------------------------------------------------------

    def append_records(
        self,
        records: Sequence[bytes],
        timestamps: Sequence[int],
        stream_seqs: Sequence[int] = (),
    ) -> None:
        """Messages written (on a quorum), numbered ``last_sequence + 1 …``, kept in the
        channel's newest page; then the count and size limits."""
        if not records:
            return
        cache, owner = self._cache, self._owner
        count = len(records)
        first = self._last + 1
        added = 0
        index = 0
        # A page at a time (one run of the hot path's batches): slices, not a loop.
        while index < count:
            seq = first + index
            number = _number(seq)
            page = cache.peek(owner, number)
            if page is None or page.end != seq:
                # A new page, or one whose earlier messages are not in memory.
                page = _Page(seq)
                cache.put(owner, number, page)
            stop = min(count, index + (number + 1) * PAGE + 1 - seq)
            run = records[index:stop]
            size = sum(map(len, run))
            page.records.extend(run)
            page.stamps.extend(timestamps[index:stop])
            if stream_seqs:
                page.stream_seqs.extend(stream_seqs[index:stop])
            else:
                page.stream_seqs.extend(_ZEROS[: stop - index])
            cost = size + RECORD_OVERHEAD * (stop - index)
            page.size += cost
            cache.grew(cost)
            added += size
            index = stop
        seq = first + count - 1
        if self._count == 0:
            self._first = self._last + 1
        self._last = seq
        self._last_ts = timestamps[-1]
        self._count += len(records)
        self._bytes += added
        cache.trim()
        self._enforce_count_and_size()

    # -- reading ------------------------------------------------------------------------

    def _page_of(self, sequence: int) -> _Page | None:
        page = self._cache.get(self._owner, _number(sequence))
        if page is None or not page.first <= sequence < page.end:
            return None
        return page

    def lookup(self, sequence: int) -> bytes | None:
        """The message, or None when it is gone or not in memory (see
        :meth:`readable_until`)."""
        if sequence < self._first or sequence > self._last:
            return None
        page = self._page_of(sequence)
        return page.records[sequence - page.first] if page is not None else None

    def lookup_run(self, first: int, last: int) -> list[bytes | None]:
        records: list[bytes | None] = []
        seq = max(first, self._first)
        records.extend([None] * (seq - first))
        last_kept = min(last, self._last)
        while seq <= last_kept:
            page = self._page_of(seq)
            if page is None:
                records.append(None)
                seq += 1
                continue
            stop = min(last_kept + 1, page.end)
            records.extend(page.records[seq - page.first : stop - page.first])
            seq = stop
        records.extend([None] * (last - max(last_kept, first - 1)))
        return records

    def readable_until(self, first: int, last: int) -> int:
        """The highest sequence up to ``last`` such that lookups of ``first`` to it are
        answered now (gone messages too); reading what follows is started, and
        :attr:`on_readable` is called once it is in memory."""
        seq = max(first, self._first)
        last_kept = min(last, self._last)
        while seq <= last_kept:
            page = self._page_of(seq)
            if page is None:
                self._load(_number(seq))
                return seq - 1
            seq = page.end
        if seq <= self._last and seq - first >= PAGE // 2:
            self._load(_number(seq))  # a subscription reading on: the next page ahead
        return last

    def stream_seq_of(self, sequence: int) -> int:
        """Where the message is in the stream, when a page in memory knows (else 0)."""
        page = self._page_of(sequence)
        return page.stream_seqs[sequence - page.first] if page is not None else 0

    def neighbours(self, sequence: int) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """The nearest messages in memory before and after ``sequence`` whose stream
        sequences are known: (STAN sequence, stream sequence) each, or None."""
        before = after = None
        page = self._cache.peek(self._owner, _number(sequence) - 1)
        if page is not None and page.records and page.stream_seqs[-1]:
            before = (page.end - 1, page.stream_seqs[-1])
        page = self._cache.peek(self._owner, _number(sequence) + 1)
        if page is not None and page.records and page.stream_seqs[0]:
            after = (page.first, page.stream_seqs[0])
        return before, after

    async def load(self, first: int, last: int) -> None:
        """Until the messages first..last are in memory (a promotion's pending ones)."""
        seq = max(first, self._first)
        while seq <= min(last, self._last):
            number = _number(seq)
            if self._page_of(seq) is None:
                self._load(number)
                task = self._loading.get(number)
                if task is not None:
                    await asyncio.shield(task)
                if self._page_of(seq) is None:
                    return  # could not be read: the deliveries ask again
            seq = (number + 1) * PAGE + 1

    def _load(self, number: int) -> None:
        if number in self._loading:
            return
        task = asyncio.get_running_loop().create_task(self._read_page(number))
        self._loading[number] = task

    async def _read_page(self, number: int) -> None:
        try:
            first = max(number * PAGE + 1, self._first)
            last = min((number + 1) * PAGE, self._last)
            if first > last:
                return
            try:
                read = await self._read(first, last)
            except StoreError as exc:
                self._read_failed(exc)
                return
            self._failed_reads = 0
            self._fill(number, first, last, read)
            self._fill_following(number + 1, [m for m in read if m.sequence > last])
        finally:
            self._loading.pop(number, None)
        self._enforce_count_and_size()
        if self.on_readable is not None:
            self.on_readable()

    def _read_failed(self, exc: StoreError) -> None:
        if not self._failed_reads:
            self._log.error(f"Unable to read messages of channel {self.channel!r}: {exc}")
        self._failed_reads += 1
        if self.on_readable is not None:  # asked again by whoever still needs them
            asyncio.get_running_loop().call_later(RETRY_AFTER_FAILURE, self.on_readable)

    def _fill_following(self, number: int, read: list[ReadMessage]) -> None:
        """Pages from ``number`` on that ``read`` (the rest of a pack read for the page
        before, in order) holds whole: kept, not read again."""
        while read:
            first = number * PAGE + 1
            last = min((number + 1) * PAGE, self._last)
            if first > last or read[0].sequence > first or read[-1].sequence < last:
                return
            if number not in self._loading and self._cache.peek(self._owner, number) is None:
                self._fill(number, first, last, read)
            read = [m for m in read if m.sequence > last]
            number += 1

    def _fill(self, number: int, first: int, last: int, read: list[ReadMessage]) -> None:
        """Page ``number`` made of what was read (first..last) and what was written
        into it meanwhile; limits and writes may have moved the figures since."""
        first = max(first, self._first)
        last = min(last, self._last)
        if first > last:
            return
        written = self._cache.peek(self._owner, number)
        by_seq = {message.sequence: message for message in read}
        page = _Page(first)
        for seq in range(first, last + 1):
            if written is not None and written.first <= seq < written.end:
                index = seq - written.first
                page.add(written.records[index], written.stamps[index], written.stream_seqs[index])
                continue
            message = by_seq.get(seq)
            if message is None:
                page.add(None, 0, 0)
            else:
                page.add(message.record, message.timestamp, message.stream_seq)
        if written is not None and written.end > page.end:  # written after ``last``
            for index in range(page.end - written.first, len(written.records)):
                page.add(written.records[index], written.stamps[index], written.stream_seqs[index])
        self._cache.put(self._owner, number, page)
        self._cache.trim()

    def fill_tail(self, messages: Sequence[ReadMessage]) -> None:
        """Messages read at promotion (the newest: stored after the figures recorded),
        into their pages."""
        start = 0
        for index in range(1, len(messages) + 1):
            if index == len(messages) or _number(messages[index].sequence) != _number(
                messages[start].sequence
            ):
                run = messages[start:index]
                self._fill(_number(run[0].sequence), run[0].sequence, run[-1].sequence, list(run))
                start = index

    # -- limits -------------------------------------------------------------------------

    async def apply_limits(self) -> None:
        """The count and size limits, now (a promotion, as a standalone store recovers:
        the oldest pages are read while the channel is over them)."""
        self._enforce_count_and_size()
        while drops_oldest(self.limits, self._count, self._bytes):
            head = self._first
            await self.load(head, head)
            self._enforce_count_and_size()
            if self._first == head:
                return  # not readable now: applied once it is

    def _enforce_count_and_size(self) -> None:
        limits = self.limits
        if not over_count_or_size(limits, self._count, self._bytes):
            return
        self._limits_warning.once(limits, self._count, self._bytes)
        first = self._first
        while drops_oldest(limits, self._count, self._bytes):
            if not self._remove_first():
                break
        if self._first != first and self.on_trimmed is not None:
            self.on_trimmed()

    def _remove_first(self) -> bool:
        """Drop the oldest message; False when its page is not in memory (read first)."""
        page = self._page_of(self._first)
        if page is None:
            self._load(_number(self._first))
            return False
        record = page.records[self._first - page.first]
        self._bytes -= len(record) if record is not None else 0
        self._count -= 1
        self._first += 1
        if self._first >= page.end and self._first > (_number(page.first) + 1) * PAGE:
            self._cache.drop(self._owner, _number(page.first))
        if self._count == 0:
            self._bytes = 0
        return True

    def expire(self, now: int) -> int:
        """Drop the messages past max_age; the oldest kept's timestamp (0: none). While
        the oldest page is being read, a time that makes the caller check again soon."""
        limits = self.limits
        if limits.max_age <= 0:
            return 0
        first = self._first
        try:
            while self._count:
                page = self._page_of(self._first)
                if page is None:
                    self._load(_number(self._first))
                    return now - limits.max_age + AGE_RECHECK_NS
                stamp = page.stamps[self._first - page.first]
                if not expired(limits, stamp, now):
                    return stamp
                self._remove_first()
            return 0
        finally:
            if self._first != first and self.on_trimmed is not None:
                self.on_trimmed()

    async def find_time(self, timestamp: int) -> None:
        """Read what :meth:`sequence_at_or_after` needs for ``timestamp``: the pages a
        binary search over the channel's pages visits."""
        low, high = _number(max(self._first, 1)), _number(max(self._last, 1))
        while low < high:
            middle = (low + high) // 2
            await self.load(middle * PAGE + 1, (middle + 1) * PAGE)
            page = self._cache.peek(self._owner, middle)
            if page is None:
                return  # not readable now: answered from what is in memory
            stamps = [s for s, r in zip(page.stamps, page.records, strict=True) if r is not None]
            if stamps and stamps[-1] >= timestamp:
                high = middle
            else:
                low = middle + 1
        await self.load(low * PAGE + 1, (low + 1) * PAGE)

    def sequence_at_or_after(self, timestamp: int) -> int:
        """From the pages in memory (:meth:`find_time` reads the ones it needs first):
        the first kept sequence stamped at or after ``timestamp``."""
        if self._last == 0:
            return 0
        if self._count == 0:
            return self._last + 1
        found = self._last + 1
        for number in range(_number(self._first), _number(self._last) + 1):
            page = self._cache.peek(self._owner, number)
            if page is None:
                continue
            for index, stamp in enumerate(page.stamps):
                seq = page.first + index
                if seq >= self._first and page.records[index] is not None and stamp >= timestamp:
                    return min(found, seq)
        return found

    def close(self) -> None:
        for task in self._loading.values():
            task.cancel()
        self._loading.clear()
        for number in range(_number(max(self._first, 1)), _number(max(self._last, 1)) + 1):
            self._cache.drop(self._owner, number)
