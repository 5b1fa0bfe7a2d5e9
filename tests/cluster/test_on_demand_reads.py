"""After a takeover the serving node holds the channels' figures, not their messages: what
subscriptions need is read from JetStream on demand, within ``--cluster_read_cache``.
Real nodes on an external JetStream, a real client: a new subscription from the first
message, a durable whose unacknowledged messages are redelivered, and a start by time all
get exactly what was stored, with more stored than the read cache holds."""

from __future__ import annotations

import asyncio
import signal
import time

from stanpkg.proto import protocol_pb2 as pb
from tests.cluster.conftest import READY, Cluster
from tests.server.stan_client import StanClient

COUNT = 4000
SIZE = 400  # 1.6 MB of payloads: more than the 1 MB read cache


def _payload(n: int) -> bytes:
    return f"m{n}".encode().ljust(SIZE, b".")


async def _publish(client: StanClient, first: int, last: int) -> None:
    for start in range(first, last + 1, 200):
        acks = [
            await client.publish_async("orders", _payload(n))
            for n in range(start, min(last, start + 199) + 1)
        ]
        await asyncio.wait_for(asyncio.gather(*acks), 30)


async def test_subscriptions_after_a_takeover_read_what_they_need_on_demand(
    cluster: Cluster, jetstream_url: str
) -> None:
    common = ["-ns", jetstream_url, "-clustered", "-cluster_bootstrap", "-st", "file"]
    common += ["--cluster_read_cache", "1MB"]
    first = cluster.start("first", [*common, "-cluster_node_id", "n1", "-dir", "n1"])
    first.wait_for(READY)
    second = cluster.start("second", [*common, "-cluster_node_id", "n2", "-dir", "n2"])
    second.wait_for("---------- Store Limits ----------")
    cid = cluster.cluster_id

    publisher = await StanClient.connect(jetstream_url, cid, "pub")
    await _publish(publisher, 1, COUNT // 2)
    await asyncio.sleep(0.3)
    middle = time.time_ns()
    await asyncio.sleep(0.3)
    await _publish(publisher, COUNT // 2 + 1, COUNT)

    # A durable that leaves 40 of its first 50 messages unacknowledged.
    holder = await StanClient.connect(jetstream_url, cid, "holder")
    durable = await holder.subscribe(
        "orders", durable="d", start=pb.First, max_inflight=50, ack_wait=2, manual_acks=True
    )
    early = await durable.collect(50, timeout=10)
    assert [m.sequence for m in early] == list(range(1, 51))
    for msg in early[:10]:
        await durable.ack(msg)
    await asyncio.sleep(1.5)  # the serving node records the acks (once a second)

    first.stop(signal.SIGKILL)  # no hand-over: the lease lapses
    second.wait_for(READY, timeout=30)

    # The durable's pending messages come again (with the ones its window had room for,
    # which the dead node may have sent already), and it goes on where it was.
    redelivered: dict[int, bytes] = {}
    highest = 0
    while len(redelivered) < 40 or highest < 200:
        msg = await durable.next(timeout=15)
        if msg.redelivered and msg.sequence <= 50:
            redelivered[msg.sequence] = msg.data
        highest = max(highest, msg.sequence)
        await durable.ack(msg)
    assert redelivered == {n: _payload(n) for n in range(11, 51)}

    reader = await StanClient.connect(jetstream_url, cid, "reader")
    everything = await reader.subscribe("orders", start=pb.First, max_inflight=500)
    got = await everything.collect(COUNT, timeout=15)
    assert [m.sequence for m in got] == list(range(1, COUNT + 1))
    assert [m.data for m in got] == [_payload(n) for n in range(1, COUNT + 1)]

    by_time = await reader.subscribe(
        "orders", start=pb.TimeDeltaStart, start_time_delta=time.time_ns() - middle
    )
    assert (await by_time.next(timeout=10)).sequence == COUNT // 2 + 1

    await publisher.publish("orders", b"after")
    assert (await everything.next()).sequence == COUNT + 1
    for client in (publisher, holder, reader):
        await client.close()
    assert second.stop() == 0
