"""A serving node that loses the lease steps down to follower and stands by again, as the
Go leader does, instead of exiting (an exit under load made a restart loop of the whole
cluster); and a serving node whose streaming process alone is killed hands over at once:
its nats-server gets SIGTERM at its parent's death and hands its JetStream leaderships
over, and the standbys see at once that nobody answers on the holder's subject."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import nats
import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.jetstream.layout import LEASE_KEY, lease_bucket
from tests.cluster.conftest import FIRST_WRITE_TIMEOUT, READY, Cluster, Node, three_node_args
from tests.server.stan_client import StanClient, StanError

pytestmark = pytest.mark.slow

STEPPED_DOWN = "Stepped down to follower: standing by"


def start_three(cluster: Cluster) -> list[Node]:
    args = three_node_args(cluster)
    return [cluster.start(name, args[name]) for name in "abc"]


def serving(nodes: list[Node], timeout: float = 60) -> Node:
    """The node that logged READY first (since its start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            if node.proc.poll() is None and READY in node.log():
                return node
        time.sleep(0.05)
    logs = "\n\n".join(f"--- {n.name}\n{n.log()}" for n in nodes)
    raise AssertionError(f"no node became ready:\n{logs}")


def serverz(node: Node) -> dict[str, object]:
    status, body = node.http("/streaming/serverz")
    assert status == 200, body
    document: dict[str, object] = json.loads(body)
    return document


def promotions(node: Node) -> int:
    status, body = node.http("/metrics")
    assert status == 200
    found = re.search(r"^nss_server_leader_promotions{[^}]*} (\d+)$", body.decode(), re.M)
    assert found, body
    return int(found.group(1))


def eventually(check: Callable[[], bool], what: str, node: Node, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s\n{node.log()}"
        time.sleep(0.1)


def assert_stepped_down(node: Node, reason: str) -> None:
    """The node logged its step-down, runs on, and monitoring (the new server's) says
    Follower."""
    eventually(lambda: STEPPED_DOWN in node.log(), "step-down", node)
    log = node.log()
    assert re.search(
        rf"\[ERR\] STREAM: cluster lease lost: {reason}; stepping down to follower", log
    ), log
    assert "[FTL]" not in log and "Shutting down." not in log
    assert node.proc.poll() is None
    eventually(lambda: serverz(node)["role"] == "Follower", "role Follower", node)
    assert serverz(node)["state"] == "CLUSTERED"


async def test_a_node_whose_lease_is_taken_steps_down_and_serves_again_later(
    cluster: Cluster,
) -> None:
    nodes = start_three(cluster)
    leader = serving(nodes)
    successor, third = (n for n in nodes if n is not leader)
    cid = cluster.cluster_id
    client = await StanClient.connect(successor.url, cid, "first")
    await client.publish("orders", b"m0", timeout=FIRST_WRITE_TIMEOUT)
    await client.close()
    assert serverz(leader)["role"] == "Leader" and promotions(leader) == 1
    # Another client takes the key over for the successor, by compare-and-set, as seen
    # from the serving node when another node took the lease: the successor, standing by,
    # finds its own ID there and takes the key.
    nc = await nats.connect(leader.url)
    try:
        kv = await nc.jetstream().key_value(lease_bucket(cid))
        entry = await kv.get(LEASE_KEY)
        assert entry.value == leader.name.encode()
        await kv.update(LEASE_KEY, successor.name.encode(), last=entry.revision)
    finally:
        await nc.close()
    assert_stepped_down(leader, re.escape(f"another node ({successor.name}) took the lease over"))
    serving([successor])
    assert serverz(leader)["role"] == "Follower"
    # Serving again: the successor stops (its lease released) while the third node's
    # streaming process is frozen (its nats-server keeps the quorum).
    third.proc.send_signal(signal.SIGSTOP)
    try:
        assert successor.stop(signal.SIGTERM, timeout=30) == 0
        eventually(lambda: leader.log().count(READY) == 2, "promoted again", leader, 60)
        assert serverz(leader)["role"] == "Leader"
        assert promotions(leader) == 2  # over the process's life
        client = await StanClient.connect(leader.url, cid, "again")
        await client.publish("orders", b"m1", timeout=FIRST_WRITE_TIMEOUT)
        sub = await client.subscribe("orders", start=pb.First)
        assert [m.data for m in await sub.collect(2, timeout=20)] == [b"m0", b"m1"]
        await client.close()
    finally:
        third.proc.send_signal(signal.SIGCONT)
    # A stop is as prompt as ever after a step-down.
    assert leader.stop(signal.SIGTERM, timeout=30) == 0


async def test_a_node_stalled_past_its_lease_steps_down_when_it_wakes(cluster: Cluster) -> None:
    """SIGSTOP of the serving node's streaming process (not its nats-server): its
    connections stay open, the standbys' probes go unanswered, so they wait out the lease
    time (4 s) and one takes over; woken, the stalled node finds the lease gone and
    steps down instead of exiting."""
    nodes = start_three(cluster)
    leader = serving(nodes)
    others = [n for n in nodes if n is not leader]
    stalled = time.monotonic()
    leader.proc.send_signal(signal.SIGSTOP)
    try:
        successor = serving(others)
        took_over = time.monotonic() - stalled
        print(f"\ntakeover {took_over:.2f} s after the serving process stalled (lease 4 s)")
        # Not before the lease time, less the renewal period (4 s / 3) at most.
        assert took_over >= 4.0 * (1 - 1 / 3) - 0.2, took_over
    finally:
        leader.proc.send_signal(signal.SIGCONT)
    assert_stepped_down(leader, r".*")
    assert successor.proc.poll() is None and serverz(successor)["role"] == "Leader"
    assert leader.stop(signal.SIGTERM, timeout=30) == 0  # standing by: a prompt, clean exit


def nats_server_of(node: Node) -> int:
    children = subprocess.run(
        ["pgrep", "-P", str(node.proc.pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    assert len(children) == 1, children
    return int(children[0])


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True


async def test_kill_9_of_the_serving_process_alone_hands_over_at_once(cluster: Cluster) -> None:
    nodes = start_three(cluster)
    leader = serving(nodes)
    survivors = [n for n in nodes if n is not leader]
    cid = cluster.cluster_id
    client = await StanClient.connect(survivors[0].url, cid, "publisher")
    await client.publish("orders", b"before", timeout=FIRST_WRITE_TIMEOUT)
    child = nats_server_of(leader)
    killed = time.monotonic()
    leader.proc.kill()  # its nats-server is not killed
    acked = ""
    while not acked and time.monotonic() - killed < 30:
        try:
            await client.publish("orders", b"after", timeout=0.5)
            acked = "after"
        except (StanError, TimeoutError):
            pass
    first_ack = time.monotonic() - killed
    deadline = time.monotonic() + 10
    while not gone(child) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    print(f"\nfirst PubAck {first_ack:.2f} s after kill -9 of the serving process alone")
    assert gone(child), "the nats-server of the killed process runs on"
    assert acked, f"no PubAck within 30 s:\n{survivors[0].log()}\n{survivors[1].log()}"
    await client.close()
    assert first_ack < 3.0, first_ack
