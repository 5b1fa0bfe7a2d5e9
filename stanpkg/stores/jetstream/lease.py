"""The cluster's lease: the one node that holds it serves (the reference's Raft leader).

A key in a replicated KV bucket holds the holder's ID. The holder renews it every third
of the lease time with compare-and-set on its revision. A standby reads the key four
times a second; when the revision has not changed for a whole lease time it takes the
key over, also by compare-and-set on the revision it saw, so at most one contender wins.
Time is measured only with each node's own monotonic clock: hosts need no clock
agreement.

A holder that has not renewed for 0.8 of the lease time gives up (self-fencing), counted
from when it *sent* its last successful renewal: that is before the write was committed,
so before any standby saw it, hence before any standby's lease time can run out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.jetstream_api import first_answer, raise_if_cancelled
from stanpkg.stores.jetstream.kv import KvBucket, WrongRevision
from stanpkg.transport.connection import NatsConnection

__all__ = ["Lease"]

T = TypeVar("T")

SELF_FENCE = 0.8  # of the lease time without a successful renewal
SILENT = 0.5  # of the lease time unrenewed: the holder is silent (see holder_silent)
RENEWALS_PER_TTL = 3
RETRY_INTERVAL = 0.25  # after a failed request (no quorum, reconnecting)
# A read or take waits this long for JetStream's answer, then tries again: the lease's
# stream may be electing a leader (its old one died with the holder), and a new leader
# does not answer the requests sent before it was elected.
ATTEMPT_TIMEOUT = 1.0
POLL_INTERVAL = 0.25  # between two reads of a standby (a direct get: any replica answers)


async def _with_send_time(ask: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """``ask()``'s answer, and when it was asked (the loop's clock)."""
    sent = asyncio.get_running_loop().time()
    return await ask(), sent


class Lease:
    """Hold ``key`` of ``bucket`` as ``holder``; ``on_lost(reason)`` is called once when a
    held lease is lost (taken over, or not renewable in time)."""

    def __init__(
        self,
        conn: NatsConnection,
        *,
        bucket: str,
        key: str,
        holder: str,
        ttl: float,
        replicas: int,
        on_lost: Callable[[str], None],
    ) -> None:
        self._conn = conn
        self._bucket = bucket
        self._key = key
        self.me = holder
        self.ttl = ttl
        self._replicas = replicas
        self._on_lost = on_lost
        self._kv: KvBucket | None = None
        self._revision = 0  # of our last write, while held
        self._renewed_at = 0.0  # when the last successful write was sent (monotonic)
        self._seen_revision = -1  # while standing by: the key's revision, and since when
        self._seen_since = 0.0
        self._held = False
        self._holder = ""
        self._renewer: asyncio.Task[None] | None = None

    @property
    def held(self) -> bool:
        return self._held

    @property
    def fresh(self) -> bool:
        """Held, and renewed within the self-fencing time by this node's clock. A process
        that was paused (SIGSTOP, a VM stall) for a lease time may run some callbacks
        before its renewer notices; what it writes then could meet a new holder's."""
        elapsed = asyncio.get_running_loop().time() - self._renewed_at
        return self._held and elapsed < self.ttl * SELF_FENCE

    @property
    def holder_silent(self) -> bool:
        """Standing by, and the holder has not renewed the lease for half the lease time
        (it renews every third): it may be gone, and a takeover may follow."""
        if self._held or self._seen_revision < 0 or not self._holder:
            return False
        return asyncio.get_running_loop().time() - self._seen_since >= self.ttl * SILENT

    @property
    def holder(self) -> str:
        """The last holder seen ("" when none)."""
        return self._holder

    async def wait_until_held(self) -> None:
        """Stand by until this node holds the lease; then renew it in the background."""
        while True:
            try:
                if self._kv is None:
                    self._kv = await KvBucket.ensure(
                        self._conn, self._bucket, replicas=self._replicas
                    )
                if await self._contend(self._kv):
                    break
            except (StoreError, TimeoutError):
                raise_if_cancelled()  # no quorum or reconnecting right now: keep trying
            await asyncio.sleep(RETRY_INTERVAL)
        self._held = True
        self._holder = self.me
        self._renewer = asyncio.get_running_loop().create_task(self._renew(self._kv))

    async def _contend(self, kv: KvBucket) -> bool:
        """Read the key now and then; take it when free or lapsed. False to start over.

        Reads, not a watch: a watch is a JetStream consumer, and creating one again after
        the holder's death waits for the elections that death started (seconds each
        attempt), while a read or a take is answered as soon as the lease's stream has a
        leader again."""
        loop = asyncio.get_running_loop()
        while True:
            # A read answered in the turn that cancels us returns its answer instead of
            # raising (Python 3.11's wait_for): the request to stop stands all the same.
            raise_if_cancelled()
            try:
                self._observe(*await asyncio.wait_for(self._read(kv), self._attempt))
            except (StoreError, TimeoutError):
                raise_if_cancelled()  # no answer now (an election): the lease time runs on
            lapsed = loop.time() - self._seen_since >= self.ttl
            # Absent or released (first come wins), ours from before a restart, or
            # unchanged for a whole lease time: try to take it.
            if not self._holder or self._holder == self.me or lapsed:
                try:
                    # Asked again every quarter second while unanswered: the lease's
                    # stream may be electing, and only answers what comes after.
                    won, sent = await first_answer(
                        partial(_with_send_time, partial(self._take, kv, self._seen_revision)),
                        timeout=self._attempt,
                        every=self._poll,
                    )
                except (StoreError, TimeoutError):
                    # No answer: read and try again. A take stored unanswered reads as
                    # ours, and is then taken again on its new revision.
                    raise_if_cancelled()
                    won = False
                if won:
                    # From when the take that won was sent (only one can: they are
                    # compare-and-set on one revision), not the first: an election can
                    # hold the first for most of the time to the fence.
                    self._renewed_at = sent
                    return True
                await asyncio.sleep(RETRY_INTERVAL)
                continue
            until_lapse = self._seen_since + self.ttl - loop.time()
            await asyncio.sleep(max(0.01, min(self._poll, until_lapse)))

    @property
    def _attempt(self) -> float:
        """How long one read or take waits for its answer."""
        return min(self.ttl, ATTEMPT_TIMEOUT)

    @property
    def _poll(self) -> float:
        return min(POLL_INTERVAL, self.ttl / 8)

    def _observe(self, revision: int, holder: str) -> None:
        """The lease time runs from the first sight of a revision; it survives restarts of
        failed reads (a stream election), so a dead holder is not waited for twice."""
        if revision != self._seen_revision:
            self._seen_revision = revision
            self._seen_since = asyncio.get_running_loop().time()
        self._holder = holder

    async def _read(self, kv: KvBucket) -> tuple[int, str]:
        entry = await kv.get(self._key)
        if entry is None:  # also a deleted key
            return 0, ""
        revision, value = entry
        return revision, value.decode(errors="replace")

    async def _take(self, kv: KvBucket, revision: int) -> bool:
        try:
            if revision and self._holder:
                self._revision = await kv.update(self._key, self.me.encode(), last=revision)
            else:
                self._revision = await kv.create(self._key, self.me.encode())
        except WrongRevision:
            return False
        return True

    async def _renew(self, kv: KvBucket) -> None:
        loop = asyncio.get_running_loop()
        period = self.ttl / RENEWALS_PER_TTL
        wait = period
        while self._held:
            fence_at = self._renewed_at + self.ttl * SELF_FENCE
            await asyncio.sleep(max(0.0, min(wait, fence_at - loop.time())))
            wait = period
            sent = loop.time()
            if sent >= fence_at:
                self._lose(f"unable to renew the lease for {self.ttl * SELF_FENCE:.1f} s")
                return
            try:
                # Sent again every poll interval while unanswered, up to the fence: a stream
                # that has just elected a leader (the last holder's node died) answers only
                # the requests that come after, and one lost renewal must not cost the
                # rest of the time to the fence. Sending it twice is harmless: it is a
                # compare-and-set on our own revision.
                self._revision, self._renewed_at = await first_answer(
                    partial(
                        _with_send_time,
                        partial(kv.update, self._key, self.me.encode(), last=self._revision),
                    ),
                    timeout=min(self._attempt, fence_at - sent),
                    every=self._poll,
                )
            except WrongRevision:
                if not await self._own_write_landed(kv):
                    self._lose(f"another node ({self._holder or 'none'}) took the lease over")
                    return
                self._renewed_at = sent
            except (StoreError, TimeoutError):
                raise_if_cancelled()
                wait = RETRY_INTERVAL  # retried until the fence

    async def _own_write_landed(self, kv: KvBucket) -> bool:
        """After a CAS failure: was it our own earlier renewal that timed out on our side
        but was stored? Then the key still names us and we adopt its revision."""
        with contextlib.suppress(StoreError, TimeoutError):
            revision, self._holder = await asyncio.wait_for(self._read(kv), self.ttl / 4)
            if self._holder == self.me:
                self._revision = revision
                return True
        return False

    def _lose(self, reason: str) -> None:
        if self._held:
            self._held = False
            self._on_lost(reason)

    async def release(self) -> None:
        """On a graceful stop: delete the key (compare-and-set, so a lease taken over
        meanwhile is left alone) and a standby takes over at once, not after ttl."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
            self._renewer = None
        if self._held and self._kv is not None:
            self._held = False
            with contextlib.suppress(StoreError, TimeoutError):
                await asyncio.wait_for(self._kv.delete(self._key, last=self._revision), self.ttl)
