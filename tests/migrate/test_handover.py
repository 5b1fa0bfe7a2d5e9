"""``stanpkg migrate`` into a running cluster hands over by itself: the serving node loads
the migrated channels, subscriptions and clients and serves them without a restart; with
no node serving, the next node to serve loads them at its promotion."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ServerInfo
from stanpkg.stores.file.format import write_server_file
from tests.cluster.conftest import READY, Cluster
from tests.cluster.test_single_node import bootstrap
from tests.migrate.conftest import migrate_json, read_only_fixture, run_migrate
from tests.migrate.served import check_served
from tests.pipeline.helpers import message_payload, write_store
from tests.server.conftest import new_cluster_id
from tests.server.stan_client import StanClient

pytestmark = pytest.mark.slow


async def test_the_serving_node_serves_the_migrated_channels_at_once(
    tmp_path: Path, cluster: Cluster
) -> None:
    copy = read_only_fixture("plain", tmp_path / "source")
    cluster.cluster_id = copy.manifest["cluster_id"]
    node = cluster.start("solo", bootstrap("solo"))
    node.wait_for(READY)
    early = await StanClient.connect(node.url, cluster.cluster_id, "early")

    summary = migrate_json("--config", str(copy.config), "--nats", node.url, "--verify")
    assert summary["verified"] is True
    assert summary["handed_over"] is True
    assert summary["handover"] == "the serving node serves them now (3 channel(s) loaded)"
    assert "Loaded 3 migrated channel(s) of 3 named" in node.log()

    # A client connected before goes on.
    await early.publish("fresh", b"before")
    fresh = await early.subscribe("fresh", start=pb.First)
    assert [m.data for m in await fresh.collect(1)] == [b"before"]
    await early.close()

    # A second run finds everything done; the serving node already has every channel.
    again = run_migrate("--config", str(copy.config), "--nats", node.url, "--verify")
    assert again.returncode == 0, again.stderr
    assert "hand-over: the serving node serves them now (0 channel(s) loaded)" in again.stdout

    # The same node, not restarted: every message with its sequence, every durable back.
    await check_served(node, copy)
    assert node.log().count(READY) == 1

    # The cluster's channels went on (check_served published): a run now is refused.
    refused = run_migrate("--config", str(copy.config), "--nats", node.url)
    assert refused.returncode == 1
    assert "the destination holds a different channel of that name" in refused.stderr
    assert node.stop() == 0


async def test_an_encrypting_cluster_serves_payloads_kept_encrypted(
    tmp_path: Path, cluster: Cluster
) -> None:
    """The serving node wraps the migrated channels in its encryption, as at promotion."""
    copy = read_only_fixture("aes", tmp_path / "source")
    cluster.cluster_id = copy.manifest["cluster_id"]
    key = copy.manifest["encryption"]["key"]
    encrypt = ["-encrypt", "-encryption_cipher", "AES", "-encryption_key", key]
    node = cluster.start("solo", [*bootstrap("solo"), *encrypt])
    node.wait_for(READY)
    summary = migrate_json(
        "--config", str(copy.config), "--nats", node.url, "--keep-encrypted", "--verify"
    )
    assert summary["verified"] is True
    assert summary["handed_over"] is True, summary["handover"]
    await check_served(node, copy)
    assert node.stop() == 0


async def test_with_no_node_serving_the_next_one_loads_them(
    tmp_path: Path, cluster: Cluster, jetstream_url: str
) -> None:
    copy = read_only_fixture("plain", tmp_path / "source")
    cluster.cluster_id = copy.manifest["cluster_id"]
    done = run_migrate("--config", str(copy.config), "--nats", jetstream_url, "--verify")
    assert done.returncode == 0, done.stderr
    assert (
        "hand-over: no node serves: the next node to serve loads them when it takes over"
        in done.stdout
    )
    assert "verify orders.created: ok" in done.stdout

    args = ["-ns", jetstream_url, "-clustered", "-cluster_bootstrap", "-cluster_node_id", "n1"]
    node = cluster.start("n1", [*args, "-st", "file", "-dir", "n1"])
    node.wait_for(READY)
    assert "Loaded" not in node.log()  # at its promotion, not by a hand-over
    await check_served(node, copy, jetstream_url)
    status, body = node.http("/streaming/serverz")
    assert status == 200 and json.loads(body)["role"] == "Leader"
    assert node.stop() == 0


async def test_the_migrated_servers_subjects_are_answered_too(
    tmp_path: Path, cluster: Cluster
) -> None:
    """The records now hold the standalone server's subjects (which the next node to serve
    answers on): the serving node answers them too and gives them to new clients, and
    keeps answering those it gave before."""
    cluster.cluster_id = new_cluster_id()
    root = tmp_path / "standalone"
    root.mkdir()
    old = dataclasses.replace(
        ServerInfo.for_cluster(cluster.cluster_id, "_STAN.discover"),
        publish="_STAN.pub.OLDPUB",
        subscribe="_STAN.sub.OLDSUB",
        close="_STAN.close.OLDCLOSE",
    )
    write_server_file(str(root / "server.dat"), old)
    write_store(root, {"ticks": 9}, slice_max_msgs=4, cluster_id=cluster.cluster_id)
    config = tmp_path / "standalone.conf"
    config.write_text(f'streaming {{ id: "{cluster.cluster_id}", store: "file", dir: "{root}" }}\n')
    node = cluster.start("solo", bootstrap("solo"))
    node.wait_for(READY)
    early = await StanClient.connect(node.url, cluster.cluster_id, "early")
    assert early.resp.pubPrefix == f"_STAN.pub.{cluster.cluster_id}"

    summary = migrate_json("--config", str(config), "--nats", node.url)
    assert summary["handed_over"] is True

    later = await StanClient.connect(node.url, cluster.cluster_id, "later")
    assert (later.resp.pubPrefix, later.resp.subRequests) == (
        "_STAN.pub.OLDPUB",
        "_STAN.sub.OLDSUB",
    )
    sub = await later.subscribe("ticks", start=pb.First)
    got = await sub.collect(9)
    assert [(m.sequence, m.data) for m in got] == [
        (seq, message_payload("ticks", seq)) for seq in range(1, 10)
    ]
    await later.publish("ticks", b"tenth")
    await early.publish("ticks", b"eleventh")
    assert [(m.sequence, m.data) for m in await sub.collect(2)] == [
        (10, b"tenth"),
        (11, b"eleventh"),
    ]
    await later.close()
    await early.close()
    assert node.stop() == 0
