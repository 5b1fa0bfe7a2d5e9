"""Stuck and vanished clients against a stanpkg process (FILE store), end to end.

A subscriber that never acks holds ``max_inflight`` messages and gets no more, however
much is published; clients that vanish without a CloseRequest (their NATS connections
dropped) are closed by the heartbeat rules of the reference (``-hbi``/``-hbt``/``-hbf``),
their plain subscriptions removed, their durables kept. The server's memory stays bounded
meanwhile: its RSS after many more messages is measured against that after a first lot.
(The heartbeat rules in detail are tests/server/test_heartbeats.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.faults.processes import StanProcess
from tests.faults.workload import CHANNEL
from tests.server.conftest import new_cluster_id
from tests.server.stan_client import StanClient
from tests.transport.conftest import free_port

MAX_INFLIGHT = 50
VANISHING = 10
WARM_UP = 2_000
MORE = 20_000
PAYLOAD = b"x" * 512
RSS_GROWTH_LIMIT = 24 * 2**20  # the per-message index of 20k messages is < 1 MiB


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def monitor(port: int, path: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return await resp.json()


async def publish(client: StanClient, count: int) -> None:
    pending = [await client.publish_async(CHANNEL, PAYLOAD) for _ in range(count)]
    for ack in pending:
        assert not (await asyncio.wait_for(ack, 30)).error


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_stuck_subscriber_and_vanished_clients(nats_url: str, tmp_path: Path) -> None:
    http = free_port()
    args = ["-ns", nats_url, "-st", "FILE", "--dir", str(tmp_path / "store"), "-m", str(http)]
    # Short, but long enough for a publisher whose answers queue behind 20k PubMsgs.
    heartbeats = ["-hbi", "500ms", "-hbt", "1s", "-hbf", "2", "-SD"]
    stan = StanProcess(new_cluster_id(), [*args, *heartbeats], tmp_path)
    await asyncio.to_thread(stan.start)
    assert stan.proc is not None
    try:
        publisher = await StanClient.connect(nats_url, stan.cluster_id, "publisher")
        stuck = await StanClient.connect(nats_url, stan.cluster_id, "stuck")
        stuck_sub = await stuck.subscribe(
            CHANNEL, manual_acks=True, max_inflight=MAX_INFLIGHT, start=pb.First, ack_wait=60
        )
        vanishing = [
            await StanClient.connect(nats_url, stan.cluster_id, f"gone-{i}")
            for i in range(VANISHING)
        ]
        for i, client in enumerate(vanishing):
            await client.subscribe(CHANNEL, manual_acks=True, max_inflight=MAX_INFLIGHT)
            await client.subscribe(CHANNEL, durable=f"d{i}", manual_acks=True, max_inflight=5)
        await publish(publisher, WARM_UP)
        for client in vanishing:
            await client.nc.close()  # gone without a CloseRequest

        for i in range(VANISHING):
            await asyncio.to_thread(stan.wait_for, f"[Client:gone-{i}] Timed out on heartbeats")
        left: list[str] = []
        for _ in range(100):  # the log line comes first, then the client's removal
            left = sorted(c["id"] for c in (await monitor(http, "/streaming/clientsz"))["clients"])
            if left == ["publisher", "stuck"]:
                break
            await asyncio.sleep(0.05)
        assert left == ["publisher", "stuck"]
        before = rss(stan.proc.pid)

        await publish(publisher, MORE)
        after = rss(stan.proc.pid)
        assert after - before < RSS_GROWTH_LIMIT, (before, after)
        channel = await monitor(http, f"/streaming/channelsz?channel={CHANNEL}&subs=1")
        assert channel["msgs"] == WARM_UP + MORE
        subs = channel["subscriptions"]
        # The stuck subscriber and the vanished clients' durables (offline) are left.
        assert [s["pending_count"] for s in subs if s["client_id"] == "stuck"] == [MAX_INFLIGHT]
        assert sorted(s["durable_name"] for s in subs if s["client_id"] != "stuck") == sorted(
            f"d{i}" for i in range(VANISHING)
        )
        await asyncio.sleep(0.3)
        assert len(stuck_sub.received) == MAX_INFLIGHT  # never more than its window
        await stuck.close()
        await publisher.close()
        print(f"stanpkg RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB over {MORE} msgs")
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
