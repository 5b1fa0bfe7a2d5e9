"""The external NATS server killed (-9) and restarted under load, end to end through a
stanpkg process started with ``-ns``: stanpkg reconnects and serves again, nothing
acknowledged is lost, a subscription made before the outage keeps receiving."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.faults.processes import StanProcess
from tests.faults.workload import CHANNEL, Publisher, gaps, read_channel
from tests.server.conftest import new_cluster_id
from tests.server.stan_client import StanClient
from tests.transport.conftest import StartNats, free_port


async def _client(url: str, cluster_id: str, client_id: str) -> StanClient:
    # As applications run: reconnect to the same URL, forever, quickly.
    nc = await nats.connect(url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    return await StanClient.connect(url, cluster_id, client_id, nc=nc)


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_external_nats_killed_and_restarted_under_load(
    start_nats: StartNats, tmp_path: Path
) -> None:
    port = free_port()
    nats_server = start_nats(port=port)
    stan = StanProcess(
        new_cluster_id(),
        ["-ns", nats_server.url, "-st", "FILE", "--dir", str(tmp_path / "s")],
        tmp_path,
    )
    await asyncio.to_thread(stan.start)
    try:
        client = await _client(nats_server.url, stan.cluster_id, "pub")
        listener = await _client(nats_server.url, stan.cluster_id, "sub")
        # Deliveries lost with the NATS server come again after the ack wait (1 s).
        sub = await listener.subscribe(CHANNEL, durable="d", start=pb.First, ack_wait=1)
        publisher = Publisher(timeout=2.0)
        publishing = asyncio.create_task(publisher.run(client))
        while len(publisher.acked_ids) < 200:
            await asyncio.sleep(0.05)
        before = len(publisher.acked_ids)
        nats_server.kill()
        await asyncio.sleep(1.5)  # publishes now get no PubAck (the client buffers them)
        nats_server = start_nats(port=port)
        await asyncio.to_thread(stan.wait_for, "reconnected to NATS Server")
        after_restart = len(publisher.acked_ids)
        while len(publisher.acked_ids) < after_restart + 200:
            await asyncio.sleep(0.05)
        publishing.cancel()
        await asyncio.gather(publishing, return_exceptions=True)
        assert stan.proc is not None and stan.proc.poll() is None

        seqs, ids = await read_channel(client)
        assert gaps(seqs) == []
        assert publisher.acked_ids <= ids  # nothing acknowledged lost
        assert len(ids) == len(seqs)  # nothing stored twice
        # The durable subscription made before the outage got everything.
        got = [m.sequence for m in sub.received]
        while len(set(got)) < len(seqs):
            got.append((await sub.next(timeout=5)).sequence)
        assert sorted(set(got)) == seqs
        assert before > 0
        await client.close()
        await listener.close()
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
