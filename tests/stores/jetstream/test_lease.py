"""The lease on real nats-servers: one holder at a time, takeover after a release (at
once) or a death (after the lease time), self-fencing of a holder that cannot renew."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import nats
import pytest

from stanpkg.stores.jetstream.jetstream_api import connect
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint
from tests.stores.jetstream.conftest import NatsProc

TTL = 1.0
_buckets = itertools.count(1)


@dataclass
class Contender:
    conn: NatsConnection
    lease: Lease
    lost: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self.lease.wait_until_held())
        return self.task

    async def die(self) -> None:
        """As a killed process: no release, the connection gone."""
        await self.conn.close()


class Race:
    """Contenders for one fresh lease; every acquisition checks that nobody else holds."""

    def __init__(self, url: str, ttl: float) -> None:
        self.url = url
        self.ttl = ttl
        self.bucket = f"lease{next(_buckets)}_{time.monotonic_ns() % 10**6}"
        self.contenders: list[Contender] = []
        self.acquired: list[Contender] = []
        self.replicas = 1

    async def add(self, name: str, url: str = "") -> Contender:
        conn = await connect(NatsEndpoint(url or self.url), name=name)
        holder: Contender

        def on_lost(reason: str) -> None:
            holder.lost.append(reason)

        lease = Lease(
            conn, bucket=self.bucket, key="leader", holder=name, ttl=self.ttl,
            replicas=self.replicas, on_lost=on_lost,
        )  # fmt: skip
        holder = Contender(conn, lease)
        self.contenders.append(holder)
        return holder

    def holders(self) -> list[Contender]:
        return [c for c in self.contenders if c.lease.held]

    async def next_holder(self, within: float) -> Contender:
        """The contender that acquires next; fails if two hold at once."""
        waiting = {c.task: c for c in self.contenders if c.task and c not in self.acquired}
        done, _ = await asyncio.wait(waiting, timeout=within, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1, f"{len(done)} acquired the lease within {within} s"
        winner = waiting[done.pop()]
        assert winner.task is not None
        winner.task.result()
        assert self.holders() == [winner], [c.lease.me for c in self.holders()]
        self.acquired.append(winner)
        return winner

    async def holder_and_standby(self) -> tuple[Contender, Contender]:
        """a holds the lease, b has started standing by."""
        a, b = await self.add("a"), await self.add("b")
        a.start()
        await self.next_holder(within=2)
        b.start()
        return a, b

    async def close(self) -> None:
        for contender in self.contenders:
            if contender.task is not None:
                contender.task.cancel()
            await contender.lease.release()
            await contender.conn.close()


@asynccontextmanager
async def race(url: str, ttl: float = TTL) -> AsyncIterator[Race]:
    made = Race(url, ttl)
    try:
        yield made
    finally:
        await made.close()


async def test_single_contender_acquires_at_once(jetstream_url: str) -> None:
    async with race(jetstream_url) as r:
        a = await r.add("a")
        a.start()
        assert await r.next_holder(within=TTL / 2) is a
        assert a.lease.held and a.lease.holder == "a"
        await asyncio.sleep(TTL * 2)  # renewed meanwhile
        assert a.lease.held and not a.lost


async def test_two_contenders_one_holds(jetstream_url: str) -> None:
    async with race(jetstream_url) as r:
        a, b = await r.add("a"), await r.add("b")
        a.start(), b.start()
        first = await r.next_holder(within=TTL * 2)
        other = b if first is a else a
        await asyncio.sleep(TTL * 2.5)  # renewals keep the standby out
        assert other.task is not None and not other.task.done()
        assert not other.lease.held and other.lease.holder == first.lease.me
        assert first.lease.held and not first.lost


async def test_release_hands_over_at_once(jetstream_url: str) -> None:
    ttl = 5.0  # so that waiting out the lease time would show
    async with race(jetstream_url, ttl) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(0.3)
        await a.lease.release()
        assert not a.lease.held and not a.lost
        assert await r.next_holder(within=ttl / 2) is b


async def test_dead_holder_is_taken_over_after_the_lease_time(jetstream_url: str) -> None:
    async with race(jetstream_url) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(TTL)
        died = time.monotonic()
        await a.die()
        assert await r.next_holder(within=TTL * 5) is b
        took_over = time.monotonic() - died
        # The dead holder had fenced itself (next_holder checked that only b holds).
        assert a.lost and "unable to renew" in a.lost[0]
        assert took_over >= TTL * 0.5, took_over  # not before the lease lapsed
        print(f"takeover {took_over:.2f} s after the holder died (ttl {TTL} s)")


async def test_a_standby_sees_a_dead_holder_go_silent_before_it_takes_over(
    jetstream_url: str,
) -> None:
    """holder_silent: after half the lease time without a renewal (the holder renews
    every third), until this standby holds the lease (then the store says so itself)."""
    async with race(jetstream_url) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(TTL)
        assert not b.lease.holder_silent and not a.lease.holder_silent
        await a.die()
        died = time.monotonic()
        while not b.lease.holder_silent and time.monotonic() - died < TTL * 3:
            await asyncio.sleep(0.02)
        silent_after = time.monotonic() - died
        assert b.lease.holder_silent and not b.lease.held
        assert silent_after < TTL, silent_after  # before the takeover: at TTL at the earliest
        assert await r.next_holder(within=TTL * 5) is b
        assert not b.lease.holder_silent  # held now


async def test_frozen_holder_is_taken_over(jetstream_url: str) -> None:
    async with race(jetstream_url) as r:
        a, b = await r.holder_and_standby()
        assert a.lease._renewer is not None
        a.lease._renewer.cancel()  # renewals stop, the connection stays
        a.lease._held = False  # the frozen process serves no more: not a second holder
        assert await r.next_holder(within=TTL * 5) is b


async def test_stale_holder_loses_on_its_next_renewal(jetstream_url: str) -> None:
    async with race(jetstream_url) as r:
        a = await r.add("a")
        a.start()
        await r.next_holder(within=2)
        # The intruder writes with another client (nats-py): the lease's bucket is a KV
        # bucket to any client.
        nc = await nats.connect(r.url)
        try:
            kv = await nc.jetstream().key_value(r.bucket)
            await kv.put("leader", b"intruder")  # as a takeover seen from the old holder
            deadline = time.monotonic() + TTL * 2
            while not a.lost and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert a.lost == ["another node (intruder) took the lease over"]
            assert not a.lease.held
            await asyncio.sleep(TTL)
            assert len(a.lost) == 1  # once
            await a.lease.release()  # leaves the intruder's key alone
            assert (await kv.get("leader")).value == b"intruder"
        finally:
            await nc.close()


@pytest.mark.slow
async def test_never_two_holders_over_repeated_failovers(jetstream_url: str) -> None:
    takeovers = []
    async with race(jetstream_url) as r:
        for name in "abc":
            (await r.add(name)).start()
        current = await r.next_holder(within=2)
        for trial in range(10):
            died = time.monotonic()
            if trial % 2:
                await current.die()
            else:
                await current.lease.release()
            current = await r.next_holder(within=TTL * 5)
            takeovers.append(time.monotonic() - died)
            (await r.add(f"n{trial}")).start()  # as the one that left, restarted
    print("takeovers (s):", " ".join(f"{t:.2f}" for t in takeovers))


@pytest.mark.slow
async def test_r3_lease_survives_the_death_of_the_holders_server(
    jetstream_cluster: list[NatsProc],
) -> None:
    (first_proc, first), (_, second), (_, third) = jetstream_cluster
    async with race(first) as r:
        r.replicas = 3
        a, b = await r.add("a", first), await r.add("b", second)
        c = await r.add("c", third)
        a.start()
        assert await r.next_holder(within=10) is a
        b.start(), c.start()
        await asyncio.sleep(TTL)
        died = time.monotonic()
        first_proc.kill()  # the holder's node: its nats-server and its streaming process
        await a.die()
        successor = await r.next_holder(within=30)
        print(f"\nR3 takeover {time.monotonic() - died:.2f} s after the holder's node died")
        assert successor.lease.me in ("b", "c")
        await asyncio.sleep(TTL * 2)
        # Names, not the contenders: a failure's report stays short and readable.
        held = [h.lease.me for h in r.holders()]
        lost = {h.lease.me: h.lost for h in r.contenders}
        assert held == [successor.lease.me] and not successor.lost, (held, lost)
