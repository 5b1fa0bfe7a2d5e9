"""The serving node answers a client on another node through a link to that node's NATS
server (server/client_links.py): PubAcks, messages and acks skip the route; a lost link
sends them the long way again and nothing is lost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time

import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.cluster.conftest import Cluster, Node
from tests.cluster.test_three_nodes import leader_of, start_three
from tests.server.stan_client import StanClient, StanSub

pytestmark = pytest.mark.slow


def links_into(node: Node, cluster_id: str) -> list[dict[str, object]]:
    """The serving node's links among the connections of ``node``'s nats-server."""
    status, body = node.http("/connz?limit=1024")  # nats-server's, through our monitor
    assert status == 200, body
    name = f"_NSS-{cluster_id}-link"
    return [c for c in json.loads(body)["connections"] if c.get("name") == name]


async def wait_for(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def linked_client(
    cluster: Cluster, count: int, ack_wait: int = 30
) -> tuple[StanClient, StanSub, Node, Node]:
    """A client on a follower, placed (its link is open), subscribed from the first
    message, and ``count`` messages it published and received; the serving node too."""
    nodes = start_three(cluster)
    leader = leader_of(nodes)
    follower = next(n for n in nodes if n is not leader)
    client = await StanClient.connect(follower.url, cluster.cluster_id, "linked")
    await wait_for(lambda: links_into(follower, cluster.cluster_id))
    sub = await client.subscribe("links", start=pb.First, ack_wait=ack_wait)
    for n in range(count):
        await client.publish("links", b"m%d" % n, timeout=15.0)
    assert [m.sequence for m in await sub.collect(count)] == list(range(1, count + 1))
    return client, sub, follower, leader


async def test_a_client_on_a_follower_is_answered_through_its_own_server(
    cluster: Cluster,
) -> None:
    cid = cluster.cluster_id
    client, sub, follower, leader = await linked_client(cluster, 100)
    try:
        # 100 PubAcks, the reply to the subscribe and 100 messages came by the link; the
        # acks went back on it (the link is the one subscribed to the ack inbox).
        await asyncio.sleep(0.5)
        (link,) = links_into(follower, cid)
        assert int(link["in_msgs"]) >= 201, link  # type: ignore[call-overload]
        assert int(link["out_msgs"]) >= 100, link  # type: ignore[call-overload]
        assert not links_into(leader, cid)  # never a link to its own server
        await sub.assert_nothing(1.0)  # every ack arrived: nothing is redelivered
    finally:
        await client.close()


async def test_a_lost_link_sends_messages_and_acks_through_the_routes(
    cluster: Cluster,
) -> None:
    client, sub, follower, _ = await linked_client(cluster, 20, ack_wait=2)
    try:
        # The follower's nats-server dies and its supervisor starts it again: the link
        # closes (links do not reconnect), the client reconnects to the new one.
        (pid,) = subprocess.run(
            ["pgrep", "-P", str(follower.proc.pid)], capture_output=True, text=True
        ).stdout.split()
        os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 30
        published = 20
        while published < 40:
            assert time.monotonic() < deadline, "publishing did not resume"
            with contextlib.suppress(Exception):
                await client.publish("links", b"m%d" % published, timeout=2.0)
                published += 1
                continue
            await asyncio.sleep(0.2)
        got = await sub.collect_until_quiet(4.0)  # over an ack wait: redeliveries included
        assert set(range(21, 41)) <= {m.sequence for m in got}
        # Acked through the routes now: nothing comes again.
        await sub.assert_nothing(3.0)
    finally:
        with contextlib.suppress(Exception):
            await client.close()
