"""Monitoring on a follower: every ``/streaming/*`` endpoint answers with the cluster's
state, as the reference's followers do, and keeps answering with the last known state
when its JetStream has lost the quorum."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.cluster.conftest import FIRST_WRITE_TIMEOUT, Cluster, Node
from tests.cluster.test_three_nodes import leader_of, start_three
from tests.server.stan_client import StanClient

pytestmark = pytest.mark.slow

AGREE_WITHIN = 20.0  # readings on request, positions and figures replicated every second
PATHS = (
    "/streaming/serverz",
    "/streaming/storez",
    "/streaming/clientsz?subs=1",
    "/streaming/channelsz?subs=1",
)
# The node's own: its ID, the time, its process, what it received and sent itself.
OWN = {"server_id", "now", "start_time", "uptime", "open_fds", "max_fds", "role", "node_id"}
OWN |= {"in_msgs", "in_bytes", "out_msgs", "out_bytes"}
# Sizes are the cluster's too: a follower shows the figures the leader replicates.


def document(node: Node, path: str) -> dict[str, Any]:
    status, body = node.http(path)
    assert status == 200, (node.name, path, body)
    result: dict[str, Any] = json.loads(body)
    return result


def shared(value: Any) -> Any:
    """What every node of the cluster reports alike."""
    if isinstance(value, dict):
        return {k: shared(v) for k, v in value.items() if k not in OWN}
    if isinstance(value, list):
        return [shared(item) for item in value]
    return value


def views(node: Node) -> dict[str, Any]:
    return {path: shared(document(node, path)) for path in PATHS}


async def agreed(leader: Node, follower: Node) -> dict[str, Any]:
    deadline = time.monotonic() + AGREE_WITHIN
    while True:
        expected, got = views(leader), views(follower)
        if got == expected:
            return got
        assert time.monotonic() < deadline, (follower.name, got, expected)
        await asyncio.sleep(0.5)


async def test_followers_answer_with_the_clusters_state(cluster: Cluster) -> None:
    nodes = start_three(cluster)
    leader = leader_of(nodes)
    followers = [node for node in nodes if node is not leader]
    cid = cluster.cluster_id
    client = await StanClient.connect(leader.url, cid, "watched")
    for i in range(10):
        await client.publish("orders", f"o{i}".encode(), timeout=FIRST_WRITE_TIMEOUT)
    for i in range(3):
        await client.publish("logs", f"l{i}".encode(), timeout=FIRST_WRITE_TIMEOUT)
    durable = await client.subscribe("orders", durable="dur", start=pb.First, manual_acks=True)
    for msg in await durable.collect(10):
        if msg.sequence <= 4:
            await durable.ack(msg)
    plain = await client.subscribe("logs", start=pb.First, manual_acks=True)
    await plain.collect(3)
    await client.ping()
    try:
        for follower in followers:
            got = await agreed(leader, follower)
            server = got["/streaming/serverz"]
            assert (server["cluster_id"], server["state"]) == (cid, "CLUSTERED")
            assert (server["clients"], server["subscriptions"], server["channels"]) == (1, 2, 2)
            assert server["total_msgs"] == 13
            channels = got["/streaming/channelsz?subs=1"]["channels"]
            assert [c["name"] for c in channels] == ["logs", "orders"]
            assert [(c["first_seq"], c["last_seq"], c["msgs"]) for c in channels] == [
                (1, 3, 3),
                (1, 10, 10),
            ]
            subs = [
                (s["last_sent"], s["pending_count"]) for c in channels for s in c["subscriptions"]
            ]
            assert subs == [(3, 3), (10, 6)]
            assert channels[1]["subscriptions"][0]["durable_name"] == "dur"
            clients = got["/streaming/clientsz?subs=1"]["clients"]
            assert [(c["id"], c["subs_count"]) for c in clients] == [("watched", 2)]
            assert sorted(clients[0]["subscriptions"]) == ["logs", "orders"]
            server = document(follower, "/streaming/serverz")
            assert (server["role"], server["node_id"]) == ("Follower", follower.name)
            assert server["total_bytes"] > 0 and server["in_msgs"] == 0
            assert document(follower, "/streaming/storez")["total_bytes"] > 0
            status, body = follower.http("/metrics")
            metrics = body.decode()
            assert status == 200
            assert re.search(r"^nss_server_stored_msgs\{[^}]*\} 13$", metrics, re.M), metrics
            assert re.search(
                r'^nss_chan_msgs_total\{[^}]*channel="orders"[^}]*\} 10$', metrics, re.M
            )
        assert document(leader, "/streaming/serverz")["node_id"] == leader.name
        # The durable goes offline: followers show it so.
        await durable.close()
        await client.ping()
        for follower in followers:
            got = await agreed(leader, follower)
            orders = got["/streaming/channelsz?subs=1"]["channels"][1]
            assert orders["subscriptions"][0]["is_offline"] is True
    finally:
        await client.close()

    # The other two nodes gone: the survivor's JetStream has no quorum; it answers with
    # what it knew.
    survivor, other = followers
    known = await agreed(leader, survivor)  # the client's close has reached it too
    leader.kill_with_its_nats_server()
    other.kill_with_its_nats_server()
    deadline = time.monotonic() + 25  # past a reading that times out, and more
    while time.monotonic() < deadline:
        assert views(survivor) == known
        await asyncio.sleep(1.0)
    assert document(survivor, "/streaming/serverz")["role"] == "Follower"
