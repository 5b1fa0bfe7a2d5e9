"""NATS away for longer than stanpkg used to wait: the server rides the outage out.

The Go reference (v0.23.2) connects to NATS with ``MaxReconnect = -1`` ("Make it try to
reconnect for ever") and ``ReconnectWait = 250 * time.Millisecond``: with an external
NATS server down for 90 s it stays up, reconnects and serves. stanpkg used to give up
after 240 attempts (about a minute). These tests shorten the wait through the plan
(``--nats_reconnect_wait``) so that an outage of a few seconds is hundreds of attempts:
a server bounded as before (``--nats_max_reconnects 240``) exits, the default one stays
up, shows the outage in ``/healthz`` and the metrics, and serves again afterwards. The
embedded nats-server, which the reference links in (it cannot die alone there), is
started again when it is killed."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import nats
import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.faults.processes import StanProcess
from tests.server.conftest import make_plan, new_cluster_id, running
from tests.server.stan_client import StanClient
from tests.transport.conftest import StartNats, free_port

WAIT = "10ms"  # between reconnect attempts: 240 attempts (the old limit) take 2.4 s
OUTAGE = 4.0  # seconds without NATS: well over 240 attempts


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


async def _client(url: str, cluster_id: str, client_id: str) -> StanClient:
    nc = await nats.connect(url, reconnect_time_wait=0.1, max_reconnect_attempts=-1)
    return await StanClient.connect(url, cluster_id, client_id, nc=nc)


async def _publish_and_receive(url: str, cluster_id: str, name: str) -> None:
    """A real STAN client publishes with acks and a subscriber receives the messages."""
    client = await _client(url, cluster_id, name)
    try:
        sub = await client.subscribe("after", start=pb.First)
        for i in range(5):
            await client.publish("after", f"m{i}".encode(), timeout=5)
        got = await sub.collect(5)
        assert [m.data for m in got] == [f"m{i}".encode() for i in range(5)]
    finally:
        await client.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_external_nats_away_longer_than_the_old_limit(
    start_nats: StartNats, tmp_path: Path
) -> None:
    port = free_port()
    nats_server = start_nats(port=port)
    http = free_port()
    common = ["-ns", nats_server.url, "--nats_reconnect_wait", WAIT]
    # The old behaviour, now an option: 240 attempts, then exit 1.
    bounded = StanProcess(new_cluster_id(), [*common, "--nats_max_reconnects", "240"], tmp_path)
    stan = StanProcess(
        new_cluster_id(),
        [*common, "-st", "FILE", "--dir", str(tmp_path / "s"), "-m", str(http)],
        tmp_path / "default",
    )
    (tmp_path / "default").mkdir()
    await asyncio.to_thread(bounded.start)
    await asyncio.to_thread(stan.start)
    try:
        before = await _client(nats_server.url, stan.cluster_id, "before")
        durable = await before.subscribe("chan", durable="d", start=pb.First)
        await before.publish("chan", b"one", timeout=5)
        assert (await durable.next(5)).data == b"one"
        assert _get(http, "/healthz") == (200, '{"status":"ok"}')

        nats_server.kill()
        await asyncio.sleep(1.0)
        status, body = await asyncio.to_thread(_get, http, "/healthz")
        assert status == 503 and json.loads(body)["status"] == "unavailable"
        metrics = (await asyncio.to_thread(_get, http, "/metrics"))[1]
        assert _metric(metrics, "nss_server_nats_connected") == 0
        assert await asyncio.to_thread(bounded.exit_code, OUTAGE) == 1
        assert "[FTL] STREAM: connection to NATS lost" in bounded.output()
        await asyncio.sleep(max(0.0, OUTAGE - 1.0 - 2.4))
        assert stan.proc is not None and stan.proc.poll() is None  # still up

        nats_server = start_nats(port=port)
        await asyncio.to_thread(stan.wait_for, "NATS is back after")
        assert _get(http, "/healthz") == (200, '{"status":"ok"}')
        metrics = (await asyncio.to_thread(_get, http, "/metrics"))[1]
        assert _metric(metrics, "nss_server_nats_connected") == 1
        assert _metric(metrics, "nss_server_nats_reconnects_total") == 1
        assert _metric(metrics, "nss_server_nats_disconnected_seconds_total") >= OUTAGE - 1.0

        await _publish_and_receive(nats_server.url, stan.cluster_id, "after")
        # The durable made before the outage goes on where it was.
        await before.publish("chan", b"two", timeout=5)
        assert (await durable.next(5)).data == b"two"
        await before.close()
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
        await asyncio.to_thread(bounded.kill9)


async def test_client_heartbeats_do_not_fail_while_nats_is_away(
    start_nats: StartNats, tmp_path: Path
) -> None:
    """Timers keep the state safe: a client whose heartbeats go unanswered only because
    the server has lost NATS is not closed (its subscriptions stay). The reference counts
    those failures (with its defaults it takes minutes of outage to close a client)."""
    port = free_port()
    nats_server = start_nats(port=port)
    plan = make_plan(
        *("-hbi", "100ms", "-hbt", "100ms", "-hbf", "2", "--nats_reconnect_wait", "20ms")
    )
    async with running(plan, nats_server.url) as (server, _log):
        client = await _client(nats_server.url, plan.cluster_id, "kept")
        sub = await client.subscribe("chan", start=pb.First, ack_wait=1, manual_acks=True)
        for i in range(20):
            await client.publish("chan", b"%02d" % i + b"x" * 1000, timeout=5)
        await sub.collect(20)  # and never acknowledged
        nats_server.kill()
        await asyncio.sleep(1.5)  # 7 heartbeat intervals, 1 ack wait... without NATS
        # Nothing piled up for NATS meanwhile: no redelivery into the void, no heartbeat.
        assert server.conn.pending_bytes + server.acks_conn.pending_bytes < 1000
        nats_server = start_nats(port=port)
        deadline = time.monotonic() + 10
        while not server.nats_link.up and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert server.nats_link.up
        assert server.clients.get("kept") is not None
        # The unacknowledged messages are redelivered once NATS is back.
        again = await sub.collect(20)
        assert all(m.redelivered for m in again)
        assert sorted(m.data[:2] for m in again) == [b"%02d" % i for i in range(20)]
        await client.close()


def _nats_child(pid: int) -> int:
    found = subprocess.run(
        ["pgrep", "-P", str(pid), "nats-server"], capture_output=True, text=True, check=False
    ).stdout.split()
    assert len(found) == 1, found
    return int(found[0])


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_embedded_nats_killed_is_started_again(tmp_path: Path) -> None:
    port, http = free_port(), free_port()
    stan = StanProcess(
        new_cluster_id(),
        ["-a", "127.0.0.1", "-p", str(port), "-m", str(http), "--nats_reconnect_wait", "50ms"],
        tmp_path,
    )
    await asyncio.to_thread(stan.start)
    url = f"nats://127.0.0.1:{port}"
    try:
        assert stan.proc is not None
        first = _nats_child(stan.proc.pid)
        subprocess.run(["kill", "-9", str(first)], check=True)
        await asyncio.to_thread(stan.wait_for, "NATS server started again")
        await asyncio.to_thread(stan.wait_for, "NATS is back after")
        assert "NATS server exited unexpectedly (exit status" in stan.output()
        assert "[FTL]" not in stan.output()
        assert _nats_child(stan.proc.pid) != first
        assert _get(http, "/healthz") == (200, '{"status":"ok"}')
        await _publish_and_receive(url, stan.cluster_id, "after-restart")
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
