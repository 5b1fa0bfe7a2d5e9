"""Servers the sink publishes to (stanpkg with the memory and FILE stores, the Go
reference), and counting what arrived with an independent STAN client (nats-py)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from tests.pipeline.live_helpers import LiveServer
from tests.server.stan_client import StanClient

SERVER_KINDS = ("memory", "file", "go")


def go_reference() -> Path | None:
    """The Go nats-streaming-server (STANPKG_REFERENCE_DIR, as the benchmarks use)."""
    ref = os.environ.get("STANPKG_REFERENCE_DIR", "")
    binary = Path(ref) / "nats-streaming-server"
    return binary if ref and binary.is_file() else None


def start_server(kind: str, workdir: Path) -> LiveServer:
    """A server of ``kind`` (SERVER_KINDS); skips the test where the Go reference is absent."""
    if kind == "memory":
        return LiveServer(workdir, "-mc", "0", "-mm", "0")
    if kind == "file":
        return LiveServer(workdir, "-st", "FILE", "--dir", str(workdir / "datastore"))
    binary = go_reference()
    if binary is None:
        pytest.skip("the Go reference nats-streaming-server is absent (STANPKG_REFERENCE_DIR)")
    return LiveServer(workdir, "-mc", "0", "-mm", "0", command=[str(binary)])


def server_fixture(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_server(kind, tmp_path_factory.mktemp(f"sink-{kind}"))
    yield server
    server.stop()


def sink_options(server: LiveServer, **extra: object) -> dict[str, str]:
    """Sink options for ``server`` (no monitor: the sink does not take it)."""
    opts = {"servers": server.url, "cluster_id": server.cluster_id, "connectTimeout": "5"}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def last_sequence(server: LiveServer, channel: str) -> int:
    url = f"{server.monitor}/streaming/channelsz?channel={channel}"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(json.loads(answer.read()).get("last_seq", 0))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return 0
        raise


def received(server: LiveServer, channel: str, timeout: float = 30) -> list[bytes]:
    """Every message of ``channel``, in sequence order, read by a nats-py STAN client."""
    last = last_sequence(server, channel)
    if not last:
        return []
    return asyncio.run(_read_all(server, channel, last, timeout))


async def _read_all(server: LiveServer, channel: str, last: int, timeout: float) -> list[bytes]:
    client = await StanClient.connect(server.url, server.cluster_id, f"count-{time.monotonic_ns()}")
    try:
        sub = await client.subscribe(channel, start=pb.First, max_inflight=8192)
        got: dict[int, bytes] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while last not in got:
            msg = await sub.next(max(0.1, deadline - loop.time()))
            got[msg.sequence] = msg.data
        await sub.close()
        return [got[seq] for seq in sorted(got)]
    finally:
        await client.close()


def rows(prefix: str, first: int, last: int) -> list[bytes]:
    """Recognisable payloads ``prefix:N``."""
    return [f"{prefix}:{n}".encode() for n in range(first, last + 1)]
