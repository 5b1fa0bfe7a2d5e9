"""The lease's thread and its probes of the holder, on a real nats-server: a holder whose
main loop is blocked still renews; a holder whose process is gone is taken over at once,
one that is only stalled after the lease time; a holder whose connection drops loses the
lease at once; a hand-over names the successor, which takes the key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import nats
import pytest

from stanpkg.stores.jetstream.lease import CONNECTION_LOST, RENEWALS_PER_TTL, SELF_FENCE
from tests.stores.jetstream.lease_race import Contender, Race, race


async def key_revision(r: Race) -> int:
    """The lease key's revision, read by another client."""
    nc = await nats.connect(r.url)
    try:
        kv = await nc.jetstream().key_value(r.bucket)
        revision = (await kv.get("leader")).revision
        assert revision is not None
        return revision
    finally:
        await nc.close()


def _busy(seconds: float) -> None:
    """CPU-bound Python for ``seconds``: it holds the interpreter lock but for the
    interpreter's forced switches."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))


@pytest.mark.parametrize("block", [time.sleep, _busy], ids=["blocking-call", "cpu-bound"])
async def test_a_blocked_main_loop_does_not_starve_the_renewals(
    jetstream_url: str, block: Callable[[float], None]
) -> None:
    """The main loop blocked longer than the self-fencing time (a blocking call, or a
    CPU-bound promotion): the holder's thread renews all the same, and the standby (whose
    thread goes on reading too) sees the renewals and keeps out."""
    ttl = 2.0
    blocked = 6.0
    assert blocked > ttl * SELF_FENCE
    async with race(jetstream_url, ttl) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(0.5)
        before = await key_revision(r)
        block(blocked)  # the main loop stands still
        renewals = await key_revision(r) - before
        assert renewals >= blocked / (ttl / RENEWALS_PER_TTL) - 3, renewals
        await asyncio.sleep(ttl)  # what the blocked loop owed runs now: nothing changes
        assert a.lease.held and a.lease.fresh and not a.lost
        assert b.task is not None and not b.task.done()
        assert not b.lease.held and b.lease.holder == "a"
        print(f"\n{renewals} renewals while the main loop was blocked {blocked:.0f} s")


async def test_a_holder_whose_process_is_gone_is_taken_over_at_once(jetstream_url: str) -> None:
    """Nobody subscribes to the holder's subject any more: "no responders" twice, and the
    standby takes the key on the revision it saw, without waiting out the lease time."""
    ttl = 10.0
    async with race(jetstream_url, ttl) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(1.0)  # b reads the key and probes a, which answers
        assert not b.lease.held and b.lease.holder == "a"
        died = time.monotonic()
        await a.die()
        assert await r.next_holder(within=ttl / 2) is b
        took_over = time.monotonic() - died
        print(f"\ntakeover {took_over:.2f} s after the holder's process died (ttl {ttl:.0f} s)")
        assert took_over < 2.0, took_over
        assert not a.lost  # closed, not lost: as a process that is gone


async def test_a_holder_of_an_earlier_release_is_not_probed(jetstream_url: str) -> None:
    """A holder of an earlier release (a rolling upgrade) writes no holder subject with
    the key and answers on none: it is alive all the same, and keeps the lease while it
    renews."""
    ttl = 2.0
    async with race(jetstream_url, ttl) as r:
        a = await r.add("a")
        a.lease._announce = {}  # its writes name no holder subject, as before
        a.start()
        await r.next_holder(within=5)
        b = await r.add("b")
        b.start()
        await asyncio.sleep(ttl * 2)
        assert a.lease.fresh and not a.lost
        assert b.task is not None and not b.task.done() and b.lease.holder == "a"


async def test_a_holder_that_is_only_stalled_is_not_taken_over_early(jetstream_url: str) -> None:
    """A stalled holder (its connection open, its probes unanswered: a stall or a
    partition) is not taken for dead: the standby waits out the lease time."""
    ttl = 3.0
    async with race(jetstream_url, ttl) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(1.0)
        stalled = time.monotonic()
        a.freeze(ttl * 2)
        assert await r.next_holder(within=ttl * 3) is b
        took_over = time.monotonic() - stalled
        print(f"\ntakeover {took_over:.2f} s after the holder stalled (ttl {ttl:.0f} s)")
        # Its last renewal was at most a renewal period before the stall.
        assert took_over >= ttl * (1 - 1 / RENEWALS_PER_TTL) - 0.1, took_over
        await wait_lost(a, ttl * 3)
        assert not a.lease.held


async def test_a_holder_whose_connection_drops_loses_the_lease_at_once(
    jetstream_url: str,
) -> None:
    """Disconnected, the holder can neither renew nor answer the probes (a standby may
    take the key at once): it stops holding at once."""
    ttl = 3.0
    async with race(jetstream_url, ttl) as r:
        a, b = await r.holder_and_standby()
        await asyncio.sleep(0.5)
        dropped = time.monotonic()
        a.lease._thread.call_soon(lambda: a.lease._conn._transport.abort())  # type: ignore[union-attr]
        await wait_lost(a, ttl)
        lost_after = time.monotonic() - dropped
        assert a.lost == [CONNECTION_LOST] and not a.lease.fresh
        assert lost_after < 0.5, lost_after
        assert await r.next_holder(within=ttl * 3) is b


async def test_a_hand_over_names_the_successor_which_takes_the_key(jetstream_url: str) -> None:
    ttl = 5.0  # so that waiting out the lease time would show
    async with race(jetstream_url, ttl) as r:
        a, b = await r.holder_and_standby()
        c = await r.add("c")
        c.start()
        await asyncio.sleep(0.5)
        assert not await c.lease.hand_over("b")  # not its to give
        started = time.monotonic()
        assert await a.lease.hand_over("b")
        assert not a.lease.held and not a.lease.fresh
        assert await r.next_holder(within=ttl / 2) is b
        took_over = time.monotonic() - started
        assert took_over < 1.5, took_over
        await asyncio.sleep(1.0)
        assert not a.lost  # given, not lost
        assert c.task is not None and not c.task.done()


async def wait_lost(contender: Contender, within: float) -> None:
    deadline = time.monotonic() + within
    while not contender.lost and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert contender.lost, f"{contender.lease.me} did not lose the lease within {within} s"
