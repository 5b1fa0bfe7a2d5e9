"""The lease on real nats-servers: one holder at a time, takeover after a release (at
once) or a stall (after the lease time), self-fencing of a holder that cannot renew.
test_lease_liveness.py has the lease's thread and its probes of the holder."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest

from tests.stores.jetstream.conftest import NatsProc
from tests.stores.jetstream.lease_race import TTL, race


async def test_single_contender_acquires_at_once(jetstream_url: str) -> None:
    async with race(jetstream_url) as r:
        a = await r.add("a")
        a.start()
        assert await r.next_holder(within=TTL * 2) is a  # its thread connects first
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


async def test_stalled_holder_is_taken_over_after_the_lease_time(jetstream_url: str) -> None:
    """A holder whose process stalls keeps its connection: the standby's probes go
    unanswered, which proves nothing, so the lease time rules."""
    async with race(jetstream_url) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(TTL)
        stalled = time.monotonic()
        a.freeze(TTL * 3)
        assert await r.next_holder(within=TTL * 5) is b
        took_over = time.monotonic() - stalled
        assert took_over >= TTL * 0.5, took_over  # not before the lease lapsed
        print(f"takeover {took_over:.2f} s after the holder stalled (ttl {TTL} s)")
        deadline = time.monotonic() + TTL * 5
        while not a.lost and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        # Awake again, the stalled holder finds it has fenced itself, or lost the key.
        assert a.lost and not a.lease.held, a.lost


async def test_a_standby_sees_a_stalled_holder_go_silent_before_it_takes_over(
    jetstream_url: str,
) -> None:
    """holder_silent: after half the lease time without a renewal (the holder renews
    every third), until this standby holds the lease (then the store says so itself)."""
    async with race(jetstream_url) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(TTL)
        assert not b.lease.holder_silent and not a.lease.holder_silent
        a.freeze(TTL * 3)
        stalled = time.monotonic()
        while not b.lease.holder_silent and time.monotonic() - stalled < TTL * 3:
            await asyncio.sleep(0.02)
        silent_after = time.monotonic() - stalled
        assert b.lease.holder_silent and not b.lease.held
        assert silent_after < TTL, silent_after  # before the takeover: at TTL at the earliest
        assert await r.next_holder(within=TTL * 5) is b
        assert not b.lease.holder_silent  # held now


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
