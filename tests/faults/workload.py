"""A publisher that publishes numbered messages with acks, a window of them in flight,
until cancelled; it knows which ones were acknowledged (those must never be lost)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from stanpkg.proto import protocol_pb2 as pb
from tests.server.stan_client import StanClient, StanError

CHANNEL = "orders"


@dataclass
class Publisher:
    window: int = 8
    timeout: float = 5.0
    next_id: int = 0
    acked_ids: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # error PubAcks and ack timeouts
    unconfirmed: int = 0  # no PubAck: stored or not, nobody knows

    async def run(self, client: StanClient) -> None:
        inflight: set[asyncio.Task[None]] = set()
        try:
            while True:
                while len(inflight) >= self.window:
                    _, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                self.next_id += 1
                inflight.add(asyncio.create_task(self._one(client, self.next_id)))
                await asyncio.sleep(0)
        finally:
            for task in inflight:
                if not task.done():
                    task.cancel()
                    self.unconfirmed += 1

    async def _one(self, client: StanClient, msg_id: int) -> None:
        try:
            await client.publish(CHANNEL, str(msg_id).encode(), timeout=self.timeout)
        except (StanError, TimeoutError) as exc:
            self.errors.append(str(exc) or type(exc).__name__)
            self.unconfirmed += 1
            return
        self.acked_ids.add(msg_id)


async def read_channel(client: StanClient, quiet: float = 1.0) -> tuple[list[int], set[int]]:
    """Every message of the channel from the first: (sequences, message numbers)."""
    sub = await client.subscribe(CHANNEL, start=pb.First, max_inflight=4096)
    seqs: list[int] = []
    ids: set[int] = set()
    while True:
        try:
            msg = await sub.next(timeout=quiet)
        except TimeoutError:
            return seqs, ids
        seqs.append(msg.sequence)
        ids.add(int(msg.data))


def gaps(seqs: list[int]) -> list[int]:
    """Sequences missing from 1..max (empty when the channel is whole and in order)."""
    if seqs == list(range(1, len(seqs) + 1)):
        return []
    return sorted(set(range(1, max(seqs, default=0) + 1)) - set(seqs)) or [-1]
