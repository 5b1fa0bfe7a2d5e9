"""Contenders for one lease on a real nats-server, each a :class:`Lease` with its own
thread and connection, as each node has: the lease tests' harness."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from stanpkg.stores.jetstream.lease import Lease
from stanpkg.transport.endpoint import NatsEndpoint

TTL = 1.0
_buckets = itertools.count(1)


@dataclass
class Contender:
    lease: Lease
    lost: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.get_running_loop().create_task(self.lease.wait_until_held())
        return self.task

    async def die(self) -> None:
        """As a killed process: no release, the lease's connection closed."""
        await self.lease.close()

    def freeze(self, seconds: float) -> None:
        """As a stalled process (SIGSTOP, a paused VM) for the lease: its thread blocks,
        its connection stays open and unread, probes of it go unanswered."""
        self.lease._thread.call_soon(time.sleep, seconds)


class Race:
    """Contenders for one fresh lease; every acquisition checks that nobody else holds."""

    def __init__(self, url: str, ttl: float) -> None:
        self.url = url
        self.ttl = ttl
        self.bucket = f"lease{next(_buckets)}_{time.monotonic_ns() % 10**6}"
        self.contenders: list[Contender] = []
        self.acquired: list[Contender] = []
        self.replicas = 1

    def subject(self, node: str) -> str:
        """The contenders' holder subjects: this race's own."""
        return f"_TEST.lease.{self.bucket}.{node}"

    async def add(self, name: str, url: str = "") -> Contender:
        holder: Contender

        def on_lost(reason: str) -> None:
            holder.lost.append(reason)

        lease = Lease(
            NatsEndpoint(url or self.url), name=name, bucket=self.bucket, key="leader",
            holder=name, holder_subject=self.subject, ttl=self.ttl, replicas=self.replicas,
            on_lost=on_lost,
        )  # fmt: skip
        holder = Contender(lease)
        self.contenders.append(holder)
        return holder

    def holders(self) -> list[Contender]:
        """Those that may write (``fresh``: what the store checks before each write). A
        stalled holder's ``held`` stays set until its thread runs again; it is not fresh
        before any standby's lease time can run out."""
        return [c for c in self.contenders if c.lease.fresh]

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
        await self.next_holder(within=5)
        b.start()
        return a, b

    async def close(self) -> None:
        for contender in self.contenders:
            if contender.task is not None:
                contender.task.cancel()
            await contender.lease.release()


@asynccontextmanager
async def race(url: str, ttl: float = TTL) -> AsyncIterator[Race]:
    made = Race(url, ttl)
    try:
        yield made
    finally:
        await made.close()
