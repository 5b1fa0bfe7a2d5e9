"""Fault-tolerant mode (``ft_group``, internal-protocol.md §3): real ``stanpkg run``
processes sharing a store and a real nats-server; clients over real NATS."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.server.modes.ft_election import decode_go_time, encode_go_time, ft_subject
from tests.server.conftest import new_cluster_id
from tests.server.stan_client import StanClient
from tests.stores.file.helpers import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
STANPKG = [sys.executable, "-c", "import sys; from stanpkg.cli import main; sys.exit(main())"]
GROUP = "grp"
READY = "Streaming Server is ready"
STANDBY = "Starting in standby mode"


# -- the activation time encoding (Go's time.Time.MarshalBinary) ---------------------------


def test_go_time_encoding_matches_the_go_layout() -> None:
    unix_ns = 1_704_164_645 * 1_000_000_000 + 6  # 2024-01-02T03:04:05.000000006Z
    encoded = encode_go_time(unix_ns, utc_offset_seconds=3600)
    assert encoded == (
        b"\x01" + (1_704_164_645 + 62_135_596_800).to_bytes(8, "big") + (6).to_bytes(4, "big")
    ) + (60).to_bytes(2, "big")
    assert decode_go_time(encoded) == unix_ns


def test_go_time_decodes_the_utc_location_and_version_2() -> None:
    body = (63_839_761_445).to_bytes(8, "big") + (7).to_bytes(4, "big")
    unix_ns = 1_704_164_645 * 1_000_000_000 + 7
    assert decode_go_time(b"\x01" + body + b"\xff\xff") == unix_ns  # time.UTC
    assert decode_go_time(b"\x02" + body + b"\x00\x00\x1e") == unix_ns  # with zone seconds


@pytest.mark.parametrize(
    "data",
    [b"", b"\x01" * 14, b"\x03" + b"\x00" * 14, b"\x01" + b"\x00" * 15, b"\x01" + b"\xff" * 14],
)
def test_go_time_rejects_bad_encodings(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_go_time(data)


# -- processes ------------------------------------------------------------------------------


@dataclass
class Node(ServerProcess):
    """One ``stanpkg run`` of the FT group, its log in a file; ``port`` is its monitor."""

    def http(self, path: str) -> tuple[int, bytes]:
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


@pytest.fixture
def group(nats_url: str, tmp_path: Path) -> Iterator[tuple[str, list[str], list[Node]]]:
    """(cluster id, the common arguments of a FILE-store FT group, the nodes started)."""
    cluster_id = new_cluster_id()
    args = ["-ns", nats_url, "-cid", cluster_id, "-st", "file", "--dir", str(tmp_path / "ds")]
    nodes: list[Node] = []
    yield cluster_id, [*args, "--ft_group", GROUP], nodes
    for node in nodes:
        if node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait()


def start(
    nodes: list[Node], name: str, args: list[str], tmp: Path, env: dict[str, str] | None = None
) -> Node:
    log_path, port = tmp / f"{name}.log", free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NATS_STREAMING")}
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [*STANPKG, "run", "-m", str(port), *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**environment, **(env or {})},
        )
    node = Node(proc, port, log_path)
    nodes.append(node)
    return node


def start_active(nodes: list[Node], args: list[str], tmp: Path) -> Node:
    active = start(nodes, "a", args, tmp)
    active.wait_for(READY)
    return active


@pytest.fixture
def lone_active(group: tuple[str, list[str], list[Node]], tmp_path: Path) -> tuple[str, Node]:
    """(cluster id, the group's only server, active)."""
    cluster_id, args, nodes = group
    return cluster_id, start_active(nodes, args, tmp_path)


def start_pair(
    nodes: list[Node], args: list[str], tmp: Path, standby_env: dict[str, str] | None = None
) -> tuple[Node, Node]:
    """The first server (active once ready), then a second one (standing by)."""
    active = start_active(nodes, args, tmp)
    standby = start(nodes, "b", args, tmp, standby_env)
    standby.wait_for(STANDBY)
    return active, standby


async def publish(url: str, cluster_id: str, channel: str, count: int, start: int = 0) -> None:
    client = await StanClient.connect(url, cluster_id, f"pub-{start}")
    try:
        for i in range(start, start + count):
            await client.publish(channel, f"m{i}".encode())
    finally:
        await client.close()


async def read_all(url: str, cluster_id: str, channel: str, count: int) -> list[bytes]:
    client = await StanClient.connect(url, cluster_id, "reader")
    try:
        sub = await client.subscribe(channel, start=pb.First)
        return [msg.data for msg in await sub.collect(count, timeout=10)]
    finally:
        await client.close()


async def test_standby_takes_over_a_killed_active_server_and_serves_its_messages(
    group: tuple[str, list[str], list[Node]], nats_url: str, tmp_path: Path
) -> None:
    cluster_id, args, nodes = group
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notifications:
        notifications.bind(str(tmp_path / "notify.sock"))
        notifications.settimeout(20)
        notify_env = {"NOTIFY_SOCKET": str(tmp_path / "notify.sock")}
        active, standby = start_pair(nodes, args, tmp_path, standby_env=notify_env)
        # systemd's start job ends when a standby is up, not when it becomes active.
        assert notifications.recv(200) == b"READY=1\nSTATUS=Standing by (fault-tolerant group)"
    await publish(nats_url, cluster_id, "orders", 20)
    await asyncio.sleep(1.5)  # longer than the missed-heartbeat interval: still standing by
    assert "Server is active" not in standby.log()

    active.stop(signal.SIGKILL)
    standby.wait_for(READY, timeout=15)
    log = standby.log()
    assert log.index("Server is active") < log.index("Recovering the state...")
    assert "Recovered 1 channel(s)" in log
    assert await read_all(nats_url, cluster_id, "orders", 20) == [
        f"m{i}".encode() for i in range(20)
    ]
    await publish(nats_url, cluster_id, "orders", 1, start=20)
    assert standby.stop() == 0


async def test_connected_clients_carry_on_through_a_failover(
    group: tuple[str, list[str], list[Node]], nats_url: str, tmp_path: Path
) -> None:
    """The point of FT: the new active server recovers the clients and subscriptions, so
    a client connected before the failover publishes and receives after it, unchanged."""
    cluster_id, args, nodes = group
    active, standby = start_pair(nodes, args, tmp_path)
    client = await StanClient.connect(nats_url, cluster_id, "survivor")
    try:
        sub = await client.subscribe("carry", durable="dur", manual_acks=True, ack_wait=2)
        for i in range(3):
            await client.publish("carry", f"before{i}".encode())
        before = await sub.collect(3)
        await sub.ack(before[0])
        await client.ping()  # the ack is in before the kill
        active.stop(signal.SIGKILL)
        await asyncio.to_thread(standby.wait_for, READY, 15)
        await client.publish("carry", b"after")
        # The unacknowledged ones come back (ack wait) and the new message arrives. An ack
        # the killed server had not written yet may be lost: at-least-once allows
        # message 1 to come back too.
        got: set[tuple[int, bool]] = set()
        while not {(2, True), (3, True), (4, False)} <= got:
            msg = await sub.next(timeout=20)
            got.add((msg.sequence, msg.redelivered))
        assert got <= {(1, True), (2, True), (3, True), (4, False)}
        assert (await client.ping()) is not None
    finally:
        await client.close()
    assert "[ERR]" not in standby.log()


async def test_graceful_stop_hands_over_and_a_stopped_standby_exits_at_once(
    group: tuple[str, list[str], list[Node]], nats_url: str, tmp_path: Path
) -> None:
    cluster_id, args, nodes = group
    first = start_active(nodes, args, tmp_path)
    second = start(nodes, "b", args, tmp_path)
    third = start(nodes, "c", args, tmp_path)
    second.wait_for(STANDBY)
    third.wait_for(STANDBY)
    await publish(nats_url, cluster_id, "a.b", 3)
    assert first.stop() == 0
    # Exactly one of the two standbys becomes active.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ready = [n for n in (second, third) if READY in n.log()]
        if ready:
            break
        await asyncio.sleep(0.1)
    assert len(ready) == 1, second.log() + third.log()
    await asyncio.sleep(3)  # the other keeps standing by while the new one heartbeats
    waiting = third if ready[0] is second else second
    assert "Server is active" not in waiting.log()
    assert await read_all(nats_url, cluster_id, "a.b", 3) == [b"m0", b"m1", b"m2"]
    began = time.monotonic()
    assert waiting.stop() == 0
    assert time.monotonic() - began < 5
    assert "[FTL]" not in waiting.log()
    assert ready[0].stop() == 0


async def test_monitoring_reports_standby_and_active(
    group: tuple[str, list[str], list[Node]], nats_url: str, tmp_path: Path
) -> None:
    import json

    cluster_id, args, nodes = group
    active, standby = start_pair(nodes, args, tmp_path)
    standby.wait_for("Starting http monitor")
    assert active.http("/streaming/isFTActive")[0] == 200
    assert standby.http("/streaming/isFTActive")[0] == 204
    status, body = standby.http("/streaming/serverz")
    assert status == 200
    serverz = json.loads(body)
    assert serverz["state"] == "FT_STANDBY"
    assert serverz["cluster_id"] == ""
    assert (serverz["clients"], serverz["channels"]) == (0, 0)
    status, body = standby.http("/streaming/channelsz")
    assert status == 200
    assert (json.loads(body)["count"], json.loads(body)["total"]) == (0, 0)
    serverz = json.loads(active.http("/streaming/serverz")[1])
    assert (serverz["state"], serverz["cluster_id"]) == ("FT_ACTIVE", cluster_id)
    assert _gauge(standby.http("/metrics")[1], "nss_server_active") == 0
    assert _gauge(active.http("/metrics")[1], "nss_server_active") == 1


def _gauge(text: bytes, name: str) -> float:
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"{name} not exported")


async def test_an_active_server_aborts_for_a_rival_activated_earlier(
    lone_active: tuple[str, Node], nats_url: str
) -> None:
    cluster_id, active = lone_active
    nc = await nats.connect(nats_url)
    try:
        subject = ft_subject(cluster_id, GROUP)
        later = spb.CtrlMsg(
            MsgType=spb.CtrlMsg.FTHeartbeat,
            ServerID="LATER",
            Data=encode_go_time(time.time_ns() + 10**12, 0),
        )
        await nc.publish(subject, later.SerializeToString())
        await nc.publish(subject, b"\xff not a CtrlMsg")
        await nc.flush()
        active.wait_for('ft: serverID "LATER" claims to be active')
        assert active.proc.poll() is None
        earlier = spb.CtrlMsg(
            MsgType=spb.CtrlMsg.FTHeartbeat, ServerID="EARLIER", Data=encode_go_time(0, 0)
        )
        await nc.publish(subject, earlier.SerializeToString())
        await nc.flush()
        assert active.proc.wait(10) == 1
    finally:
        await nc.close()
    assert '[FTL] STREAM: ft: serverID "EARLIER" claims to be active, aborting' in active.log()


async def test_heartbeats_are_go_encoded_and_always_the_same_bytes(
    lone_active: tuple[str, Node], nats_url: str
) -> None:
    cluster_id, active = lone_active
    nc = await nats.connect(nats_url)
    try:
        sub = await nc.subscribe(ft_subject(cluster_id, GROUP))
        beats = [await sub.next_msg(timeout=3) for _ in range(2)]
    finally:
        await nc.close()
    first = spb.CtrlMsg.FromString(beats[0].data)
    assert first.MsgType == spb.CtrlMsg.FTHeartbeat
    assert first.ServerID and "ServerID: " + first.ServerID in active.log()
    assert abs(decode_go_time(first.Data) - time.time_ns()) < 60 * 10**9
    assert beats[1].data == beats[0].data  # the same bytes every time


async def test_sqlite_store_fails_over_after_the_lock_goes_stale(
    nats_url: str, tmp_path: Path
) -> None:
    cluster_id = new_cluster_id()
    args = [
        *("-ns", nats_url, "-cid", cluster_id, "--ft_group", GROUP),
        *("-st", "sql", "--sql_driver", "sqlite", "--sql_source", str(tmp_path / "stan.db")),
    ]
    nodes: list[Node] = []
    try:
        active, standby = start_pair(nodes, args, tmp_path)
        await publish(nats_url, cluster_id, "sql.ft", 5)
        active.stop(signal.SIGKILL)  # the lock row stays: it must go stale first
        standby.wait_for(READY, timeout=30)
        assert await read_all(nats_url, cluster_id, "sql.ft", 5) == [
            f"m{i}".encode() for i in range(5)
        ]
        assert standby.stop() == 0
    finally:
        for node in nodes:
            if node.proc.poll() is None:
                node.proc.kill()
                node.proc.wait()


def test_memory_store_is_refused_in_ft_mode(tmp_path: Path) -> None:
    done = subprocess.run(
        [*STANPKG, "validate", "--ft_group", GROUP],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "ft: only FILE or SQL stores supported in FT mode" in done.stdout + done.stderr
