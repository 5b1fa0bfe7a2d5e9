"""Real nats-servers with JetStream for the clustered store's tests: one shared server,
and routed clusters of n servers started on demand.

``async def`` tests run through tests/server/conftest.py's hook (imported below).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from tests.server.conftest import (  # noqa: F401 - fixtures and the async-test hook
    nats_url,
    pytest_pyfunc_call,
    start_nats_process,
)
from tests.transport.conftest import free_port

NatsProc = tuple[subprocess.Popen[bytes], str]
CLUSTER_READY_WITHIN = 30.0  # the meta leader's election on a loaded 2-core machine


def jetstream_conf(store_dir: Path, name: str) -> str:
    return f'server_name: "{name}"\njetstream {{ store_dir: "{store_dir}" }}\n'


def start_jetstream_server(tmp: Path, name: str = "js1", extra_conf: str = "") -> NatsProc:
    """One nats-server with JetStream, its store under ``tmp``."""
    return start_nats_process(tmp, jetstream_conf(tmp / "js", name) + extra_conf)


def stop_nats(procs: list[NatsProc]) -> None:
    for proc, _ in procs:
        if proc.poll() is None:
            proc.kill()
    for proc, _ in procs:
        proc.wait(10)


def start_jetstream_cluster(
    tmp_path: Path, n: int = 3, http_ports: list[int] | None = None
) -> list[NatsProc]:
    """n routed nats-servers with JetStream (server names js1..jsn), returned once the
    JetStream meta leader is elected; ``http_ports``: their monitoring ports. The caller
    stops them (:func:`stop_nats`)."""
    route_ports = [free_port() for _ in range(n)]
    started: list[NatsProc] = []
    try:
        for index, port in enumerate(route_ports):
            routes = ", ".join(f'"nats://127.0.0.1:{p}"' for p in route_ports if p != port)
            cluster = (
                f'cluster {{ name: "jstest", listen: "127.0.0.1:{port}", routes: [{routes}] }}\n'
            )
            if http_ports:
                cluster += f"http: 127.0.0.1:{http_ports[index]}\n"
            name = f"js{index + 1}"
            started.append(start_jetstream_server(tmp_path / name, name, cluster))
        wait_jetstream_ready([url for _, url in started], CLUSTER_READY_WITHIN)
    except BaseException:
        stop_nats(started)
        raise
    return started


def wait_jetstream_ready(urls: list[str], timeout: float) -> None:
    """Until JetStream answers through every URL (a cluster: its meta leader elected).
    Runs in its own thread so that it works from synchronous fixtures and async tests."""
    failure: list[BaseException] = []

    async def poll() -> None:
        deadline = time.monotonic() + timeout
        for url in urls:
            nc = await nats.connect(url, connect_timeout=2)
            try:
                while True:
                    try:
                        await nc.jetstream(timeout=1).account_info()
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.2)
            finally:
                await nc.close()

    def run() -> None:
        try:
            asyncio.run(poll())
        except BaseException as exc:  # reported in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise RuntimeError(f"JetStream not ready at {urls}") from failure[0]


@pytest.fixture(scope="session")
def jetstream_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One nats-server with JetStream shared by the session (tests use their own buckets
    and streams)."""
    started = [start_jetstream_server(tmp_path_factory.mktemp("jetstream"))]
    wait_jetstream_ready([started[0][1]], 10)
    yield started[0][1]
    stop_nats(started)


@pytest.fixture
def jetstream_cluster(tmp_path: Path) -> Iterator[list[NatsProc]]:
    """A fresh 3-server JetStream cluster for one test."""
    started = start_jetstream_cluster(tmp_path, 3)
    yield started
    stop_nats(started)


@pytest.fixture
def monitored_cluster(tmp_path: Path) -> Iterator[tuple[list[NatsProc], list[int]]]:
    """A fresh 3-server JetStream cluster with monitoring ports: (servers, ports)."""
    http_ports = [free_port() for _ in range(3)]
    started = start_jetstream_cluster(tmp_path, 3, http_ports)
    yield started, http_ports
    stop_nats(started)


def metadata_leader(http_port: int) -> str:
    """The server name of JetStream's metadata leader, as a server's ``/jsz`` says."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/jsz", timeout=2) as answer:
        return str(json.load(answer)["meta_cluster"]["leader"])


async def lead_elsewhere(url: str, stream: str, avoid: str) -> None:
    """Step the stream's leader down until a server other than ``avoid`` leads it."""
    nc = await nats.connect(url)
    try:
        for _ in range(40):
            info = await nc.jetstream().stream_info(stream)
            leader = info.cluster.leader if info.cluster else None
            if leader and leader != avoid:
                return
            if leader:
                await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", b"", timeout=2)
            await asyncio.sleep(0.25)
        raise AssertionError(f"the leader of {stream} stays on {avoid}")
    finally:
        await nc.close()
