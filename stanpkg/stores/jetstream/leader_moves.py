"""The JetStream leaders of the cluster's streams follow the serving node.

Every stream (each shared stream, the records, the lease) is its own Raft group, and a stream
whose leader dies takes JetStream's election (4-9 s, not tunable) to be writable again.
Only the serving node writes. With every leader on its server, the death of a standby
stalls nothing (as a follower's death in the reference's single Raft group), and the
lease cannot lapse under a serving node that is alive because the lease's stream lost a
leader elsewhere. The serving node's own death costs the elections it would cost anyway,
running side by side with the lease time. Writes also skip a route hop to a remote leader.

The move is JetStream's leader step-down with a preferred server (nats-server 2.11+),
asked only of a stream whose replica on this server is current. A write sent while a
stream's leadership changes hands can go unanswered for the write timeout (5 s, then it
is sent again), so the shared streams are moved at promotion, before anything is written
to them (the first write to a channel waits for its stream's move, and moves it once more
if that one did not land), and the records and the lease by a sweep at promotion and
every GATHER_INTERVAL (their writes are few, and retried), with the shared streams whose
move at promotion did not land while nothing is written to them.

Only a node that holds a fresh lease asks: a node that lost it and moved the lease's
stream anyway would take that stream's leader from its successor, whose renewals then
wait for a new one; under load that costs the successor its lease too, and the lease
passes from node to node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

from stanpkg.stores.base import StoreError, StoreLog
from stanpkg.stores.jetstream.connection import ASK_AGAIN_EVERY, first_answer, raise_if_cancelled
from stanpkg.stores.jetstream.paced_repeat import repeat
from stanpkg.stores.jetstream.stream_management import lead_stream_from
from stanpkg.transport.connection import NatsConnection

__all__ = ["GATHER_INTERVAL", "LeaderGathering", "SharedStreamMoves", "gather_leaders"]

GATHER_INTERVAL = 10.0  # seconds between two sweeps, at least
COST_FACTOR = 4  # a sweep that takes t seconds waits 4t before the next
CONCURRENT = 16  # STREAM.INFO requests in flight at once
MOVE_WITHIN = 3.0  # seconds a stream's first write waits for its leader to move
MOVE_POLL = 0.05
MOVE_ASK_AGAIN = 1.0  # seconds after a step-down that did not land here
MOVE_REQUEST_TIMEOUT = 1.0


def _always() -> bool:
    return True


class LeaderGathering:
    """Sweep ``streams()`` now and then, asking each one led elsewhere to move its
    leadership to the JetStream server this node's connection is on; :meth:`lead_here`
    moves one at once. Nothing is asked while ``entitled()`` is false (the store's: this
    node serves under a fresh lease)."""

    def __init__(
        self,
        conn: NatsConnection,
        streams: Callable[[], Iterable[str]],
        log: StoreLog,
        *,
        entitled: Callable[[], bool] = _always,
    ) -> None:
        self._conn = conn
        self._streams = streams
        self._log = log
        self._entitled = entitled
        self._task: asyncio.Task[None] | None = None
        self.moved = 0  # leaderships asked over since the start

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def lead_here(self, stream: str) -> bool:
        """Bring one stream's leader here and wait until it is (a shared stream's, before
        its first write); after MOVE_WITHIN seconds it stays where it is, and writes go on.
        Whether it is led here."""
        server = str(self._conn.server_info.get("server_name", ""))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MOVE_WITHIN
        asked_at = -MOVE_ASK_AGAIN
        last_problem = "its leader did not move"
        while loop.time() < deadline:
            if not self._entitled():
                return False  # the write it waits for is refused anyway
            ask = loop.time() - asked_at >= MOVE_ASK_AGAIN  # a step-down may land elsewhere
            wait = min(MOVE_REQUEST_TIMEOUT, max(0.05, deadline - loop.time()))
            try:
                # Looked at first, asked again and again: a stream electing its leader
                # (it died with the last serving node) answers only what comes after.
                outcome = await first_answer(
                    lambda: lead_stream_from(self._conn, stream, server, ask=False),
                    timeout=wait,
                    every=ASK_AGAIN_EVERY,
                    woken_by=self._conn,
                )
                if outcome != "here" and ask:
                    outcome = await asyncio.wait_for(
                        lead_stream_from(self._conn, stream, server), wait
                    )
            except (StoreError, TimeoutError) as exc:
                # No answer while the leadership changes hands: ask again.
                raise_if_cancelled()
                last_problem = str(exc) or "no answer"
                outcome = "not now"
            if outcome == "here":
                return True
            if outcome == "asked":
                if asked_at < 0:  # once a stream: after a hand-over there is none
                    self._log.notice(f"Moving the JetStream leader of stream {stream} here")
                asked_at = loop.time()
                self.moved += 1
            await asyncio.sleep(MOVE_POLL)
        self._log.warn(
            f"The leader of stream {stream} stays on another server for now: {last_problem}"
        )
        return False

    async def _run(self) -> None:
        await repeat(
            self.sweep,
            interval=GATHER_INTERVAL,
            cost_factor=COST_FACTOR,
            log=self._log,
            failed=lambda exc: f"Unable to move stream leaders to this node: {exc}",
            errors=(StoreError,),
        )

    async def sweep(self) -> int:
        """One pass over every stream; the number of leaderships asked over."""
        server = str(self._conn.server_info.get("server_name", ""))
        limit = asyncio.Semaphore(CONCURRENT)

        async def one(stream: str) -> str:
            async with limit:
                # Looked at again for each stream: the lease may go during the sweep.
                ask = self._entitled()
                outcome = await lead_stream_from(self._conn, stream, server, ask=ask)
            if outcome == "asked":
                self._log.notice(f"Moving the JetStream leader of stream {stream} here")
            return outcome

        results = await asyncio.gather(
            *(one(stream) for stream in self._streams()), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        moved = sum(1 for r in results if r == "asked")
        self.moved += moved
        if failures:
            raise StoreError(f"{len(failures)} of {len(results)} streams: {failures[0]}")
        return moved


class SharedStreamMoves:
    """The moves of the shared streams' leaders to the serving node in one leadership.

    Each starts at promotion (:meth:`start`), while nothing is written to the stream. The
    first write of every channel of a stream waits for one :meth:`settle` of it: that
    move, or once more when it gave up, so nothing is in flight on the stream while its
    leader moves. A move that missed while nothing waits on it yet is :meth:`missed`, for
    the sweep to ask again."""

    def __init__(self, gathering: LeaderGathering) -> None:
        self._gathering = gathering
        self._moves: dict[str, asyncio.Task[bool]] = {}
        self._settled: dict[str, asyncio.Future[None]] = {}

    def start(self, stream: str) -> asyncio.Task[bool]:
        moving = self._moves.get(stream)
        if moving is None or moving.cancelled():
            moving = self._moves[stream] = asyncio.ensure_future(self._gathering.lead_here(stream))
        return moving

    def missed(self, streams: Iterable[str]) -> list[str]:
        """Those of ``streams`` whose move gave up and that no write waits on yet."""
        return [stream for stream in streams if self._missed(stream)]

    def _missed(self, stream: str) -> bool:
        moving = self._moves.get(stream)
        if moving is None or not moving.done() or moving.cancelled():
            return False
        return moving.result() is False and stream not in self._settled

    def settle(self, stream: str) -> Awaitable[None]:
        settling = self._settled.get(stream)
        if settling is None or settling.cancelled():
            settling = self._settled[stream] = asyncio.ensure_future(self._settle(stream))
        return asyncio.shield(settling)

    async def _settle(self, stream: str) -> None:
        if not await asyncio.shield(self.start(stream)):
            await self._gathering.lead_here(stream)

    def cancel(self) -> None:
        """The moves and the sweep stopped."""
        self._gathering.stop()
        for moving in self._moves.values():
            moving.cancel()
        for settling in self._settled.values():
            settling.cancel()


def gather_leaders(
    conn: NatsConnection,
    records: list[str],
    shared: list[str],
    log: StoreLog,
    entitled: Callable[[], bool],
) -> SharedStreamMoves:
    """The leaders of ``records`` (the records' and the lease's streams) gathered onto
    this node by a sweep, with the ``shared`` streams whose move at promotion missed; the
    shared streams' moves, each started once its stream answers (``start``). Nothing is
    asked while ``entitled()`` is false."""
    gathering = LeaderGathering(
        conn, lambda: [*records, *moves.missed(shared)], log, entitled=entitled
    )
    moves = SharedStreamMoves(gathering)
    gathering.start()
    return moves
