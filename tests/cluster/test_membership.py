"""The reference's runtime membership requests, `_STAN.raft.<cluster_id>.node.add/remove`,
answered by the serving node when `allow_add_remove_node` is set: done as JetStream
replica moves (the replacement server first), and the serving node removing itself steps
down and exits 0."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nats
import pytest
from nats.errors import NoRespondersError

from stanpkg.plan.compile import nats_cluster_name
from stanpkg.proto import protocol_pb2 as pb
from tests.cluster.conftest import FIRST_WRITE_TIMEOUT, Cluster, Node, three_node_args
from tests.cluster.test_three_nodes import leader_of
from tests.server.conftest import start_nats_process
from tests.server.stan_client import StanClient

pytestmark = pytest.mark.slow


def start_three(cluster: Cluster, *extra: str) -> list[Node]:
    args = three_node_args(cluster)
    return [cluster.start(name, [*args[name], *extra]) for name in "abc"]


async def ask(url: str, cluster_id: str, action: str, node: str) -> str:
    nc = await nats.connect(url)
    try:
        msg = await nc.request(f"_STAN.raft.{cluster_id}.node.{action}", node.encode(), 10)
        return msg.data.decode()
    finally:
        await nc.close()


async def replicas(url: str, stream_prefix: str) -> dict[str, list[str]]:
    """Every stream of the cluster and the servers holding it."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        out = {}
        for name in await js.streams_info():
            config = name.config
            if not str(config.name).startswith(stream_prefix):
                continue
            info = await js.stream_info(str(config.name))
            cluster = info.cluster
            assert cluster is not None
            names = [str(cluster.leader)] + [str(p.name) for p in cluster.replicas or ()]
            out[str(config.name)] = names
        return out
    finally:
        await nc.close()


async def serving_one_message(cluster: Cluster) -> tuple[list[Node], Node]:
    """Three nodes answering membership requests, channel "orders" holding b"one"."""
    nodes = start_three(cluster, "-cluster_allow_add_remove_node")
    leader = leader_of(nodes)
    # The leader is ready on a quorum: wait for the third node to answer for its ID too.
    deadline = time.monotonic() + 60
    while not all("Cluster Node ID" in n.log() for n in nodes):
        assert time.monotonic() < deadline, [n.log() for n in nodes]
        await asyncio.sleep(0.1)
    client = await StanClient.connect(leader.url, cluster.cluster_id, "m")
    await client.publish("orders", b"one", timeout=FIRST_WRITE_TIMEOUT)
    await client.close()
    return nodes, leader


async def test_membership_requests(cluster: Cluster, tmp_path: Path) -> None:
    nodes, leader = await serving_one_message(cluster)
    cid = cluster.cluster_id
    follower = next(n for n in nodes if n is not leader)

    assert await ask(leader.url, cid, "add", "") == '-ERR adding node "": invalid node ID'
    assert (await ask(leader.url, cid, "add", "zz")).startswith(
        '-ERR adding node "zz": no node with this ID is running'
    )
    assert await ask(leader.url, cid, "add", follower.name) == "+OK"
    # Three servers, three replicas of each stream: nowhere to move this one's.
    refused = await ask(leader.url, cid, "remove", follower.name)
    assert refused.startswith(f'-ERR removing node "{follower.name}": ')
    assert "peer remap failed" in refused

    # A fourth JetStream server joins by the cluster's routes: now the replicas move.
    routes = route_urls(nodes)
    conf = (
        f'server_name: "d"\njetstream {{ store_dir: "{tmp_path / "d" / "js"}" }}\n'
        f'cluster {{ name: "{nats_cluster_name(cid)}", listen: "127.0.0.1:-1", '
        f"routes: [{', '.join(json.dumps(r) for r in routes)}] }}\n"
    )
    fourth, _ = start_nats_process(tmp_path / "d", conf)
    try:
        deadline = time.monotonic() + 60
        while True:
            answer = await ask(leader.url, cid, "remove", follower.name)
            if answer == "+OK" or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)  # until JetStream counts the new server
        assert answer == "+OK"
        deadline = time.monotonic() + 30
        while True:
            try:
                held = await replicas(leader.url, "")
            except nats.errors.TimeoutError:
                held = {"a stream without a leader while its peers move": [follower.name]}
            if all(follower.name not in names for names in held.values()):
                break
            assert time.monotonic() < deadline, held
            await asyncio.sleep(0.5)
    finally:
        fourth.kill()
        fourth.wait(10)


async def test_the_serving_node_removing_itself_steps_down(cluster: Cluster) -> None:
    nodes, leader = await serving_one_message(cluster)
    cid = cluster.cluster_id
    assert await ask(leader.url, cid, "remove", leader.name) == "+OK"
    assert leader.proc.wait(30) == 0  # as the reference's leader: step down, exit 0
    successor = leader_of([n for n in nodes if n is not leader])
    client = await StanClient.connect(successor.url, cid, "m2")
    sub = await client.subscribe("orders", start=pb.First)
    assert [m.data for m in await sub.collect(1)] == [b"one"]
    await client.close()


def route_urls(nodes: list[Node]) -> list[str]:
    """Where the nodes' nats-servers listen for routes (read back from their logs)."""
    lines = [line for node in nodes for line in node.log().splitlines()]
    return [f"nats://{line.rsplit(' ', 1)[-1]}" for line in lines if "Listening for route" in line]


async def test_membership_requests_are_not_answered_unless_allowed(cluster: Cluster) -> None:
    nodes = start_three(cluster)
    leader = leader_of(nodes)
    with pytest.raises(NoRespondersError):
        await ask(leader.url, cluster.cluster_id, "remove", "b")
