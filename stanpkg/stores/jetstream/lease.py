"""The cluster's lease: the one node that holds it serves (the reference's Raft leader).

A key in a replicated KV bucket of its own holds the holder's ID. Not a key of the
records, though that would spare a host loss one election: renewals would queue behind
the records' writes in one Raft group (thousands of channel figures a round while
channels fill), and a loaded holder would fence itself and refuse publishes.

The holder renews it every third of the lease time with compare-and-set on its
revision. A standby reads the key four times a second; when the revision has not changed
for a whole lease time it takes the key over, also by compare-and-set on the revision it
saw, so at most one contender wins.
Time is measured only with each node's own monotonic clock: hosts need no clock
agreement.

A holder that has not renewed for 0.8 of the lease time gives up (self-fencing), counted
from when it *sent* its last successful renewal: that is before the write was committed,
so before any standby saw it, hence before any standby's lease time can run out.

A holder whose process is gone is not waited for. While its process lives, the holder's
lease connection answers on its holder subject (:func:`layout.lease_holder_subject`),
which each of its writes names (:data:`layout.LEASE_PROBE_HEADER`); a standby asks there
at every read. NATS answers "no responders" at once when nobody subscribes: twice in a
row, and the standby takes the key over on the revision it saw. A value without the
header (an earlier release's, in a rolling upgrade) is never probed.
Silence (a stalled process, a partition) proves nothing, and then the lease time rules.
A holder whose lease connection drops loses the lease at once: it can no longer renew it
nor answer, and a standby may take it.

All of this runs on a thread of its own, with its own event loop and its own connection
(``loop_thread.py``), so that nothing the node's main loop does (a long promotion, a
blocking call, load) delays a renewal. The main loop reads ``held``, ``fresh``,
``holder_silent`` and ``holder`` (consistent under a lock, by ``time.monotonic()``),
awaits ``wait_until_held``, ``release``, ``hand_over`` and ``close``, and receives
``on_lost`` through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import (
    connect,
    elections_of,
    first_answer,
    raise_if_cancelled,
)
from stanpkg.stores.jetstream.kv_bucket import KvBucket, WrongRevision
from stanpkg.stores.jetstream.layout import (
    LEASE_KEY,
    LEASE_PROBE_HEADER,
    lease_bucket,
    lease_holder_subject,
)
from stanpkg.stores.jetstream.loop_thread import LoopThread
from stanpkg.transport.errors import NatsError, NoRespondersError

if TYPE_CHECKING:
    from stanpkg.transport.connection import NatsConnection
    from stanpkg.transport.endpoint import NatsEndpoint

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
# Probes of the holder's subject in a row that nobody subscribed to: its process is gone.
# Two, a poll apart: a holder that has just taken the key may not have its interest known
# on every server of the cluster yet (routes carry it in milliseconds).
GONE_AFTER = 2
CONNECTION_LOST = "its connection to NATS was lost"


async def _with_send_time(ask: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """``ask()``'s answer, and when it was asked (monotonic)."""
    sent = time.monotonic()
    return await ask(), sent


class Lease:
    """Hold ``key`` of ``bucket`` as ``holder``; ``on_lost(reason)`` is called once, on
    the loop that called :meth:`wait_until_held`, when a held lease is lost (taken over,
    not renewable in time, or its connection lost)."""

    def __init__(
        self,
        endpoint: NatsEndpoint,
        *,
        name: str,
        bucket: str,
        key: str,
        holder: str,
        holder_subject: Callable[[str], str],
        ttl: float,
        replicas: int,
        on_lost: Callable[[str], None],
    ) -> None:
        self._endpoint = endpoint
        self._name = name  # of the lease's connection
        self._bucket = bucket
        self._key = key
        self.me = holder
        self._holder_subject = holder_subject  # a node ID's holder subject
        self.ttl = ttl
        self._replicas = replicas
        self._on_lost = on_lost
        self._main: asyncio.AbstractEventLoop | None = None  # where on_lost is called
        self._thread = LoopThread(f"lease-{holder}")
        # Only the lease's thread touches these.
        self._conn: NatsConnection | None = None
        self._kv: KvBucket | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._acquiring: asyncio.Task[Any] | None = None
        self._closed = False
        self._revision = 0  # of our last write, while held
        self._unanswered = 0  # probes in a row of the holder seen that nobody subscribed to
        self._probe = ""  # where the holder seen answers ("": an earlier release's value)
        # What our writes carry: where we answer.
        self._announce = {LEASE_PROBE_HEADER: holder_subject(holder)}
        # Written by the lease's thread, read by the main one: under the lock.
        self._lock = threading.Lock()
        self._renewed_at = 0.0  # when the last successful write was sent (monotonic)
        self._seen_revision = -1  # while standing by: the key's revision, and since when
        self._seen_since = 0.0
        self._held = False
        self._holder = ""

    @classmethod
    def for_cluster(
        cls,
        endpoint: NatsEndpoint,
        cluster_id: str,
        node_id: str,
        *,
        ttl: float,
        replicas: int,
        on_lost: Callable[[str], None],
    ) -> Lease:
        """The lease of cluster ``cluster_id`` for node ``node_id`` (layout.py's names)."""
        return cls(
            endpoint,
            name=f"_NSS-{cluster_id}-{node_id}-lease",
            bucket=lease_bucket(cluster_id),
            key=LEASE_KEY,
            holder=node_id,
            holder_subject=partial(lease_holder_subject, cluster_id),
            ttl=ttl,
            replicas=replicas,
            on_lost=on_lost,
        )

    # -- read from any thread ---------------------------------------------------------

    @property
    def held(self) -> bool:
        return self._held

    @property
    def fresh(self) -> bool:
        """Held, and renewed within the self-fencing time by this node's clock. A process
        that was paused (SIGSTOP, a VM stall) for a lease time may run some callbacks
        before its renewer notices; what it writes then could meet a new holder's."""
        with self._lock:
            held, renewed_at = self._held, self._renewed_at
        return held and time.monotonic() - renewed_at < self.ttl * SELF_FENCE

    @property
    def holder_silent(self) -> bool:
        """Standing by, and the holder has not renewed the lease for half the lease time
        (it renews every third): it may be gone, and a takeover may follow."""
        with self._lock:
            if self._held or self._seen_revision < 0 or not self._holder:
                return False
            since = self._seen_since
        return time.monotonic() - since >= self.ttl * SILENT

    @property
    def holder(self) -> str:
        """The last holder seen ("" when none)."""
        return self._holder

    # -- called on the main loop --------------------------------------------------------

    async def wait_until_held(self) -> None:
        """Stand by until this node holds the lease; then renew it in the background."""
        self._main = asyncio.get_running_loop()
        self._thread.start()
        await asyncio.wrap_future(self._thread.submit(self._acquire()))

    async def release(self) -> None:
        """On a graceful stop: delete the key (compare-and-set, so a lease taken over
        meanwhile is left alone) and a standby takes over at once, not after ttl. Then
        :meth:`close`."""
        try:
            await self._on_thread(self._release())
        finally:
            await self.close()

    async def hand_over(self, successor: str) -> bool:
        """On a graceful stop: write ``successor``'s node ID in the key, by compare-and-set
        on this holder's revision, and stop renewing; the successor, standing by, reads
        its own ID there and takes the key (see _contend). True when written. False when
        this node does not hold the lease or the write did not land: then it still holds
        it and renews on, unless the key turned out to be another node's (lost) or could
        not be read (neither held nor lost: a stop follows)."""
        return bool(await self._on_thread(self._hand_over(successor)))

    async def close(self) -> None:
        """Stop renewing and contending, close the lease's connection and stop its thread;
        the key is left as it is, as a process that dies leaves it."""
        try:
            await self._on_thread(self._close())
        finally:
            self._thread.stop()

    async def _on_thread(self, coro: Coroutine[Any, Any, T]) -> T | None:
        if not self._thread.running:
            coro.close()
            return None
        return await asyncio.wrap_future(self._thread.submit(coro))

    # -- on the lease's thread ------------------------------------------------------------

    async def _acquire(self) -> None:
        self._acquiring = asyncio.current_task()
        while True:
            try:
                kv = await self._open()
                won = await self._contend(kv)
                assert self._conn is not None
                # Won on a connection that dropped since: nobody answers on our holder
                # subject, so a standby may take the key; contend again once back.
                if won and self._conn.is_connected:
                    break
            except (StoreError, NatsError, TimeoutError):
                raise_if_cancelled()  # no quorum or reconnecting right now: keep trying
            await asyncio.sleep(RETRY_INTERVAL)
        with self._lock:
            self._held = True
            self._holder = self.me
        self._renewer = asyncio.get_running_loop().create_task(self._renew(kv))

    async def _open(self) -> KvBucket:
        """The lease's own connection, answering on our holder subject, and the bucket."""
        if self._closed:
            raise asyncio.CancelledError()  # closed while contending: no new connection
        if self._conn is None:
            self._conn = await connect(
                self._endpoint, name=self._name, on_disconnected=self._disconnected
            )
            # Sent before any take on this connection, so the server knows it first.
            self._conn.subscribe(self._holder_subject(self.me), self._answer)
        if self._kv is None:
            self._kv = await KvBucket.ensure(self._conn, self._bucket, replicas=self._replicas)
        return self._kv

    def _answer(self, _subject: str, reply: str, _data: bytes) -> None:
        if reply and self._conn is not None:
            self._conn.publish(reply, b"")

    def _disconnected(self) -> None:
        self._lose(CONNECTION_LOST)

    async def _contend(self, kv: KvBucket) -> bool:
        """Read the key now and then; take it when free, lapsed or its holder's process is
        gone. False to start over.

        Reads, not a watch: a watch is a JetStream consumer, and creating one again after
        the holder's death waits for the elections that death started (seconds each
        attempt), while a read or a take is answered as soon as the lease's stream has a
        leader again."""
        while True:
            # A read answered in the turn that cancels us returns its answer instead of
            # raising (Python 3.11's wait_for): the request to stop stands all the same.
            raise_if_cancelled()
            try:
                self._observe(*await asyncio.wait_for(self._read(kv), self._attempt))
            except (StoreError, TimeoutError):
                raise_if_cancelled()  # no answer now (an election): the lease time runs on
            holder, started = self._holder, time.monotonic()
            lapsed = started - self._seen_since >= self.ttl
            gone = False
            if holder and holder != self.me and not lapsed and self._probe:
                gone = await self._holder_gone(self._probe)
            # Absent or released (first come wins), ours (from before a restart, or
            # handed over to us), unchanged for a whole lease time, or its holder's
            # process gone: try to take it.
            if not holder or holder == self.me or lapsed or gone:
                try:
                    # Asked again every quarter second while unanswered: the lease's
                    # stream may be electing, and only answers what comes after.
                    won, sent = await first_answer(
                        partial(_with_send_time, partial(self._take, kv, self._seen_revision)),
                        timeout=self._attempt,
                        every=self._poll,
                        woken_by=self._conn,
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
                    with self._lock:
                        self._renewed_at = sent
                    return True
                await self._pause(RETRY_INTERVAL)
                continue
            now = time.monotonic()
            until_lapse = self._seen_since + self.ttl - now
            await asyncio.sleep(max(0.01, min(self._poll - (now - started), until_lapse)))

    async def _pause(self, seconds: float) -> None:
        """Between two takes: cut short when a stream leader's election is announced
        (the lease's stream answers again: connection.Elections)."""
        elections = elections_of(self._conn) if self._conn is not None else None
        if elections is None:
            await asyncio.sleep(seconds)
        else:
            await elections.wait(seconds)

    async def _holder_gone(self, subject: str) -> bool:
        """Whether nobody subscribed to the holder's ``subject``, GONE_AFTER probes in a
        row. Only "no responders" counts: an unanswered probe may be a partition or a
        stall."""
        assert self._conn is not None
        try:
            await self._conn.request(subject, b"", self._poll)
        except NoRespondersError:
            self._unanswered += 1
        except (NatsError, TimeoutError):
            self._unanswered = 0
        else:
            self._unanswered = 0
        return self._unanswered >= GONE_AFTER

    @property
    def _attempt(self) -> float:
        """How long one read or take waits for its answer."""
        return min(self.ttl, ATTEMPT_TIMEOUT)

    @property
    def _poll(self) -> float:
        return min(POLL_INTERVAL, self.ttl / 8)

    def _observe(self, revision: int, holder: str, probe: str) -> None:
        """The lease time runs from the first sight of a revision; it survives restarts of
        failed reads (a stream election), so a dead holder is not waited for twice."""
        self._probe = probe
        with self._lock:
            if revision != self._seen_revision or holder != self._holder:
                self._unanswered = 0
            if revision != self._seen_revision:
                self._seen_revision = revision
                self._seen_since = time.monotonic()
            self._holder = holder

    async def _read(self, kv: KvBucket) -> tuple[int, str, str]:
        """The key's revision, holder and holder subject (all empty when it has none)."""
        entry = await kv.entry(self._key)
        if entry is None:  # also a deleted key
            return 0, "", ""
        revision, value, headers = entry
        return revision, value.decode(errors="replace"), headers.get(LEASE_PROBE_HEADER, "")

    async def _take(self, kv: KvBucket, revision: int) -> bool:
        me, announce = self.me.encode(), self._announce
        try:
            if revision and self._holder:
                self._revision = await kv.update(self._key, me, last=revision, headers=announce)
            else:
                self._revision = await kv.create(self._key, me, headers=announce)
        except WrongRevision:
            return False
        return True

    async def _renew(self, kv: KvBucket) -> None:
        period = self.ttl / RENEWALS_PER_TTL
        wait = period
        while self._held:
            fence_at = self._renewed_at + self.ttl * SELF_FENCE
            await asyncio.sleep(max(0.0, min(wait, fence_at - time.monotonic())))
            wait = period
            sent = time.monotonic()
            if sent >= fence_at:
                self._lose(f"unable to renew the lease for {self.ttl * SELF_FENCE:.1f} s")
                return
            try:
                # Sent again every poll interval while unanswered, up to the fence: a stream
                # that has just elected a leader (the last holder's node died) answers only
                # the requests that come after, and one lost renewal must not cost the
                # rest of the time to the fence. Sending it twice is harmless: it is a
                # compare-and-set on our own revision.
                revision, renewed_at = await first_answer(
                    partial(
                        _with_send_time,
                        partial(
                            kv.update,
                            self._key,
                            self.me.encode(),
                            last=self._revision,
                            headers=self._announce,
                        ),
                    ),
                    timeout=min(self._attempt, fence_at - sent),
                    every=self._poll,
                    woken_by=self._conn,
                )
                self._revision = revision
                with self._lock:
                    self._renewed_at = renewed_at
            except WrongRevision:
                if not await self._own_write_landed(kv):
                    self._lose(f"another node ({self._holder or 'none'}) took the lease over")
                    return
                with self._lock:
                    self._renewed_at = sent
            except (StoreError, TimeoutError):
                raise_if_cancelled()
                wait = RETRY_INTERVAL  # retried until the fence

    async def _own_write_landed(self, kv: KvBucket) -> bool:
        """After a CAS failure: was it our own earlier renewal that timed out on our side
        but was stored? Then the key still names us and we adopt its revision."""
        with contextlib.suppress(StoreError, TimeoutError):
            revision, holder, _ = await asyncio.wait_for(self._read(kv), self.ttl / 4)
            with self._lock:
                self._holder = holder
            if holder == self.me:
                self._revision = revision
                return True
        return False

    def _lose(self, reason: str) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._tell_lost(reason)

    def _tell_lost(self, reason: str) -> None:
        main = self._main
        if main is not None:
            with contextlib.suppress(RuntimeError):  # the main loop is closed: nobody to tell
                main.call_soon_threadsafe(self._on_lost, reason)

    async def _stop_renewing(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

    async def _release(self) -> None:
        await self._stop_renewing()
        with self._lock:
            held, self._held = self._held, False
        if held and self._kv is not None:
            with contextlib.suppress(StoreError, TimeoutError):
                await asyncio.wait_for(self._kv.delete(self._key, last=self._revision), self.ttl)

    async def _hand_over(self, successor: str) -> bool:
        await self._stop_renewing()
        kv = self._kv
        # Not fresh from here on: nothing this node writes may follow the successor's.
        with self._lock:
            held, self._held = self._held, False
        if not held or kv is None:
            return False
        holder = self.me
        # Where the successor answers: should it die before it takes the key, the other
        # standbys see it gone.
        announce = {LEASE_PROBE_HEADER: self._holder_subject(successor)}
        for _ in range(2):  # again once if a renewal cancelled in flight had landed
            with contextlib.suppress(StoreError, TimeoutError):
                await first_answer(
                    partial(
                        kv.update,
                        self._key,
                        successor.encode(),
                        last=self._revision,
                        headers=announce,
                    ),
                    timeout=self._attempt,
                    every=self._poll,
                    woken_by=self._conn,
                )
                holder = successor
                break
            # Refused or unanswered (it may have landed all the same): the key says which.
            try:
                revision, holder, _ = await asyncio.wait_for(self._read(kv), self._attempt)
            except (StoreError, TimeoutError):
                return False
            if holder != self.me:
                break
            self._revision = revision
        with self._lock:
            self._holder = holder
        if holder == self.me:  # still ours: hold and renew on
            with self._lock:
                self._held = True
            self._renewer = asyncio.get_running_loop().create_task(self._renew(kv))
        elif holder != successor:
            self._tell_lost(f"another node ({holder or 'none'}) took the lease over")
        return holder == successor

    async def _close(self) -> None:
        self._closed = True
        acquiring = self._acquiring
        if acquiring is not None and not acquiring.done():
            acquiring.cancel()
        await self._stop_renewing()
        with self._lock:
            self._held = False
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
