"""A one-node cluster (bootstrap) and nodes on an external JetStream: start-up, serving,
every acknowledged message and durable position back after a restart, bad input."""

from __future__ import annotations

import asyncio
import json
import signal

import nats
import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.jetstream.layout import (
    DEFAULT_CHANNEL_STREAMS,
    channel_stream_index,
    channel_subject,
    shared_stream_name,
)
from tests.cluster.conftest import LEADER, READY, Cluster
from tests.server.stan_client import StanClient
from tests.server.test_fault_tolerance import publish

pytestmark = pytest.mark.slow


def bootstrap(node_id: str) -> list[str]:
    """A one-node cluster on the embedded nats-server."""
    return [
        "-clustered",
        "-cluster_bootstrap",
        "-cluster_node_id",
        node_id,
        "-st",
        "file",
        "-dir",
        "store",
    ]


async def test_bootstrap_node_serves_and_recovers_everything(cluster: Cluster) -> None:
    args = bootstrap("solo")
    node = cluster.start("solo", args)
    node.wait_for(READY)
    await publish(node.url, cluster.cluster_id, "orders", 50)
    client = await StanClient.connect(node.url, cluster.cluster_id, "reader")
    sub = await client.subscribe("orders", durable="dur", start=pb.First, manual_acks=True)
    got = await sub.collect(50)
    for msg in got[:30]:
        await sub.ack(msg)
    await client.ping()
    await client.close(keep_nats=False)
    status, body = node.http("/streaming/serverz")
    assert status == 200
    serverz = json.loads(body)
    assert (serverz["state"], serverz["role"]) == ("CLUSTERED", "Leader")
    await asyncio.sleep(1.5)  # subscription positions are replicated each second
    assert node.stop() == 0

    again = cluster.start("solo", args, port=node.port)
    again.wait_for(READY)
    assert "Cluster Node ID : solo" in again.log()
    client = await StanClient.connect(again.url, cluster.cluster_id, "reader")
    sub = await client.subscribe("orders", durable="dur", manual_acks=True)
    resumed = await sub.collect(20)
    assert [m.sequence for m in resumed] == list(range(31, 51))
    reader = await client.subscribe("orders", start=pb.First)
    assert [m.data for m in await reader.collect(50)] == [f"m{i}".encode() for i in range(50)]
    await client.close()
    assert again.stop() == 0


async def test_an_idle_channel_is_deleted_and_comes_back_empty_after_a_restart(
    cluster: Cluster,
) -> None:
    """max_inactivity in a cluster: the channel's messages and record go, a channel created
    again under its name starts at 1 without the old messages, also for the node that
    loads the state next."""
    args = [*bootstrap("idle"), "-mi", "1s"]
    node = cluster.start("idle", args)
    node.wait_for(READY)
    await publish(node.url, cluster.cluster_id, "idle", 5)
    deadline = asyncio.get_running_loop().time() + 10
    while 'Channel "idle" has been deleted' not in node.log():
        assert asyncio.get_running_loop().time() < deadline, node.log()
        await asyncio.sleep(0.1)
    await publish(node.url, cluster.cluster_id, "idle", 2, start=100)
    assert node.stop() == 0
    again = cluster.start("idle", args, port=node.port)
    again.wait_for(READY)
    client = await StanClient.connect(again.url, cluster.cluster_id, "reader")
    sub = await client.subscribe("idle", start=pb.First)
    got = await sub.collect_until_quiet()
    assert [(m.sequence, m.data) for m in got] == [(1, b"m100"), (2, b"m101")]
    await client.close()
    assert again.stop() == 0


def _where(cluster_id: str, channel: str) -> tuple[str, str]:
    """A channel's subject and its shared stream (a new cluster's layout)."""
    index = channel_stream_index(channel, DEFAULT_CHANNEL_STREAMS)
    return channel_subject(cluster_id, index, channel), shared_stream_name(cluster_id, index)


async def test_a_plain_jetstream_consumer_reads_a_channel(cluster: Cluster) -> None:
    args = bootstrap("js")
    node = cluster.start("js", args)
    node.wait_for(READY)
    await publish(node.url, cluster.cluster_id, "events.created", 5)
    nc = await nats.connect(node.url)
    try:
        js = nc.jetstream()
        subject, stream = _where(cluster.cluster_id, "events.created")
        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
        payloads = [(await sub.next_msg(5)).data for _ in range(5)]
    finally:
        await nc.close()
    assert payloads == [f"m{i}".encode() for i in range(5)]
    assert node.stop() == 0


async def test_an_encrypted_cluster_keeps_only_ciphertext_in_jetstream(cluster: Cluster) -> None:
    """With encryption, the channel's stream holds the encrypted payloads (the store gets
    the records encrypted, never the plaintext beside them); clients read the plaintext,
    after a restart too."""
    args = [*bootstrap("enc"), "-encrypt", "-encryption_key", "mykey"]
    node = cluster.start("enc", args)
    node.wait_for(READY)
    await publish(node.url, cluster.cluster_id, "secrets", 5)
    nc = await nats.connect(node.url)
    try:
        subject, stream = _where(cluster.cluster_id, "secrets")
        sub = await nc.jetstream().subscribe(subject, stream=stream, ordered_consumer=True)
        stored = [(await sub.next_msg(5)).data for _ in range(5)]
    finally:
        await nc.close()
    plain = [f"m{i}".encode() for i in range(5)]
    # Each a ciphertext: not the payload, and longer by a nonce and a tag at least.
    assert all(c != p and len(c) >= len(p) + 16 for c, p in zip(stored, plain, strict=True))
    assert node.stop() == 0
    again = cluster.start("enc", args, port=node.port)
    again.wait_for(READY)
    client = await StanClient.connect(again.url, cluster.cluster_id, "reader")
    reader = await client.subscribe("secrets", start=pb.First)
    assert [m.data for m in await reader.collect(5)] == plain
    await client.close()
    assert again.stop() == 0


async def test_nodes_on_an_external_jetstream_hand_over(
    cluster: Cluster, jetstream_url: str
) -> None:
    """Two nodes on one external JetStream keep no state of their own: the standby takes
    over when the leader stops and serves everything it had stored."""
    common = ["-ns", jetstream_url, "-clustered", "-cluster_bootstrap", "-st", "file"]
    first = cluster.start("first", [*common, "-cluster_node_id", "n1", "-dir", "n1"])
    first.wait_for(READY)
    second = cluster.start("second", [*common, "-cluster_node_id", "n2", "-dir", "n2"])
    second.wait_for("---------- Store Limits ----------")
    await publish(jetstream_url, cluster.cluster_id, "orders", 20)
    assert LEADER not in second.log()
    status, body = second.http("/streaming/serverz")
    assert status == 200 and json.loads(body)["role"] == "Follower"
    first.stop(signal.SIGKILL)  # no hand-over: the lease lapses
    second.wait_for(READY, timeout=20)
    client = await StanClient.connect(jetstream_url, cluster.cluster_id, "after")
    sub = await client.subscribe("orders", start=pb.First)
    assert [m.data for m in await sub.collect(20)] == [f"m{i}".encode() for i in range(20)]
    await client.publish("orders", b"m20")
    assert (await sub.next()).sequence == 21
    await client.close()
    assert second.stop() == 0


def test_an_external_nats_without_jetstream_is_refused(cluster: Cluster, nats_url: str) -> None:
    node = cluster.start(
        "n",
        [
            "-ns",
            nats_url,
            "-clustered",
            "-cluster_bootstrap",
            "-cluster_node_id",
            "n",
            "-st",
            "file",
            "-dir",
            "store",
        ],
    )
    assert node.proc.wait(30) == 1
    assert "does not have JetStream enabled (clustered mode needs it)" in node.log()
    assert "Traceback" not in node.log()


def test_a_node_id_already_in_use_is_refused(cluster: Cluster, jetstream_url: str) -> None:
    common = ["-ns", jetstream_url, "-clustered", "-cluster_bootstrap", "-st", "file"]
    first = cluster.start("first", [*common, "-cluster_node_id", "same", "-dir", "d1"])
    first.wait_for(READY)
    second = cluster.start("second", [*common, "-cluster_node_id", "same", "-dir", "d2"])
    assert second.proc.wait(30) == 1
    assert 'cluster node ID "same" is already in use by another node' in second.log()
    assert first.proc.poll() is None


def test_a_log_path_shared_by_two_nodes_is_refused(cluster: Cluster) -> None:
    shared = ["-clustered", "-cluster_bootstrap", "-st", "file", "-cluster_log_path", "raft"]
    first = cluster.start("first", [*shared, "-cluster_node_id", "n1", "-dir", "d1"])
    first.wait_for(READY)
    second = cluster.start("second", [*shared, "-cluster_node_id", "n2", "-dir", "d2"])
    assert second.proc.wait(30) == 1
    assert 'cluster log path "raft" is in use by another node' in second.log()
    assert "Traceback" not in second.log()


@pytest.mark.timeout(120)
def test_peers_that_never_come_up_end_in_an_error_naming_them(cluster: Cluster) -> None:
    node = cluster.start(
        "lonely",
        [
            "-clustered",
            "-cluster_node_id",
            "a",
            "-cluster_peers",
            "b,c",
            "-st",
            "file",
            "-dir",
            "store",
        ],
    )
    node.wait_for("---------- Store Limits ----------")
    assert node.proc.wait(100) == 1
    log = node.log()
    assert "the cluster did not form within 60 s (peers: b, c; 3 replicas wanted)" in log
    assert "Traceback" not in log


async def test_a_resend_after_a_takeover_is_acknowledged_not_stored_again(
    cluster: Cluster, jetstream_url: str
) -> None:
    """The client resends a message whose PubAck it never saw (same publish ID) to the
    node that took over: acknowledged, stored once. The Go server stores it twice."""
    common = ["-ns", jetstream_url, "-clustered", "-cluster_bootstrap", "-st", "file"]
    first = cluster.start("first", [*common, "-cluster_node_id", "n1", "-dir", "n1"])
    first.wait_for(READY)
    second = cluster.start("second", [*common, "-cluster_node_id", "n2", "-dir", "n2"])
    second.wait_for("---------- Store Limits ----------")
    cid = cluster.cluster_id
    client = await StanClient.connect(jetstream_url, cid, "resender")
    channel_subject = f"{client.resp.pubPrefix}.orders"
    for guid in ("g1", "g2", "g1"):  # a resend to the same leader too
        ack = await client.raw_publish(
            client.pub_msg("orders", guid.encode(), guid=guid), channel_subject
        )
        assert ack.error == "" and ack.guid == guid
    await client.close()
    first.stop(signal.SIGKILL)
    second.wait_for(READY, timeout=20)
    client = await StanClient.connect(jetstream_url, cid, "resender2")
    channel_subject = f"{client.resp.pubPrefix}.orders"
    ack = await client.raw_publish(client.pub_msg("orders", b"g2", guid="g2"), channel_subject)
    assert ack.error == "" and ack.guid == "g2"
    ack = await client.raw_publish(client.pub_msg("orders", b"g3", guid="g3"), channel_subject)
    assert ack.error == ""
    sub = await client.subscribe("orders", start=pb.First)
    assert [(m.sequence, m.data) for m in await sub.collect(3)] == [
        (1, b"g1"),
        (2, b"g2"),
        (3, b"g3"),
    ]
    await sub.assert_nothing(0.5)
    await client.close()


async def test_raft_logging_shows_jetstreams_raft_lines_only(cluster: Cluster) -> None:
    """The reference's raft_logging shows its Raft library's lines: here the embedded
    nats-server's Raft and JetStream debug lines, without its other debug lines."""
    node = cluster.start("r", [*bootstrap("r"), "-cluster_raft_logging"])
    node.wait_for(READY)
    await publish(node.url, cluster.cluster_id, "orders", 5)
    debug = [line for line in node.log().splitlines() if "[DBG]" in line]
    assert any("JetStream" in line for line in debug), node.log()  # one node: no Raft
    assert all("RAFT" in line or "JetStream" in line for line in debug), debug
    quiet = cluster.start("q", bootstrap("q"))
    quiet.wait_for(READY)
    assert "[DBG]" not in quiet.log()
