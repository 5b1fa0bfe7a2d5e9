"""The SQL database (a private PostgreSQL cluster) crashed and restarted while clients
publish: error PubAcks while it is down, stanpkg serves again when it is back without a
restart of its own, nothing acknowledged lost; the sequences of rejected publishes stay
unused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.faults.postgres import PrivatePostgres, unavailable
from tests.faults.processes import StanProcess
from tests.faults.workload import CHANNEL, Publisher, gaps, read_channel
from tests.server.conftest import new_cluster_id
from tests.server.stan_client import StanClient


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    pg = PrivatePostgres()
    try:
        pg.create()
        yield pg
    finally:
        pg.destroy()


async def _acked_at_least(publisher: Publisher, count: int) -> None:
    while len(publisher.acked_ids) < count:
        await asyncio.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_postgres_crashed_and_restarted_under_load(
    postgres: PrivatePostgres, nats_url: str, tmp_path: Path
) -> None:
    args = ["-ns", nats_url, "-st", "SQL", "--sql_driver", "postgres"]
    stan = StanProcess(new_cluster_id(), [*args, "--sql_source", postgres.dsn], tmp_path)
    await asyncio.to_thread(stan.start)
    try:
        client = await StanClient.connect(nats_url, stan.cluster_id, "pub")
        listener = await StanClient.connect(nats_url, stan.cluster_id, "sub")
        # ack_wait 1 s: a delivery whose ack could not be stored comes again soon.
        durable = await listener.subscribe(CHANNEL, durable="d", start=pb.First, ack_wait=1)
        publisher = Publisher(timeout=5.0)
        publishing = asyncio.create_task(publisher.run(client))
        await asyncio.wait_for(_acked_at_least(publisher, 200), 30)
        await asyncio.to_thread(postgres.stop, "immediate")
        while len(publisher.errors) < 20:  # the outage is felt: error PubAcks
            await asyncio.sleep(0.05)
        down = len(publisher.acked_ids)
        await asyncio.to_thread(postgres.start)
        await asyncio.wait_for(_acked_at_least(publisher, down + 200), 30)
        publishing.cancel()
        await asyncio.gather(publishing, return_exceptions=True)
        assert stan.proc is not None and stan.proc.poll() is None

        seqs, ids = await read_channel(client)
        # A rejected publish keeps its sequence, as in the reference (its SQL store
        # drops a batch whose flush failed): holes, at most one per error PubAck, which
        # subscribers step over (the reader above got the messages after them).
        assert seqs == sorted(set(seqs))
        assert 0 < len(gaps(seqs)) <= len(publisher.errors)
        assert publisher.acked_ids <= ids
        assert all(error.startswith("sql: ") for error in publisher.errors), publisher.errors[:3]
        # The durable made before the outage got every stored message.
        got = {m.sequence for m in durable.received}
        while not got >= set(seqs):
            got.add((await durable.next(timeout=5)).sequence)
        await client.close()
        await listener.close()
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
