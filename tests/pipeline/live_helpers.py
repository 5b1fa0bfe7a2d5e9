"""A real stanpkg server process for the live-source tests, a publisher, and a streaming
query's Parquet output."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from stanpkg.client import StanBenchClient
from stanpkg.transport import NatsConnection
from tests.stores.file.helpers import free_port

_ids = itertools.count(1)
RUNNER = (
    "import sys\n"
    "from stanpkg.plan.compile import compile_args\n"
    "from stanpkg.node import run\n"
    "sys.exit(run(compile_args(sys.argv[1:], env={}).plan))\n"
)


class LiveServer:
    """``stanpkg`` with an embedded NATS server and monitoring on free ports."""

    def __init__(self, workdir: Path, *args: str, command: list[str] | None = None) -> None:
        """``command``: another STAN server's command line start (the Go reference)."""
        self.cluster_id = f"live-{next(_ids)}-{time.monotonic_ns() % 100000}"
        self.port, self.http_port = free_port(), free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.monitor = f"http://127.0.0.1:{self.http_port}"
        self.log = workdir / f"{self.cluster_id}.log"
        argv = ["-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.http_port)]
        argv += ["-cid", self.cluster_id, *args]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [*(command or [sys.executable, "-c", RUNNER]), *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if b"Streaming Server is ready" in self.log.read_bytes():
                with contextlib.suppress(OSError):
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("stanpkg did not start:\n" + self.log.read_text())

    def options(self, **extra: object) -> dict[str, str]:
        """Reader options for this server (monitor included unless overridden)."""
        opts = {"servers": self.url, "cluster_id": self.cluster_id, "monitor": self.monitor}
        opts.update({k: str(v) for k, v in extra.items()})
        return {k: v for k, v in opts.items() if v != ""}

    def publish(self, channel: str, payloads: Iterable[bytes]) -> None:
        asyncio.run(publish(self.url, self.cluster_id, {channel: list(payloads)}))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


async def publish(url: str, cluster_id: str, messages: dict[str, list[bytes]]) -> None:
    """Publish every message and wait for all the PubAcks."""
    nc = await NatsConnection.connect(url)
    try:
        stan = await StanBenchClient.connect(nc, cluster_id, f"pub-{time.monotonic_ns()}")
        errors: list[str] = []
        for channel, payloads in messages.items():
            for data in payloads:
                await stan.wait_for_window()
                stan.publish_async(channel, data, lambda e: errors.append(e) if e else None)
        await stan.wait_all_acked()
        assert not errors, errors[:3]
        await stan.close()
    finally:
        await nc.close()


def payloads(channel: str, first: int, last: int) -> list[bytes]:
    """Recognisable payloads for sequences first..last of a channel."""
    return [f"{channel}:{seq}".encode() for seq in range(first, last + 1)]


def parquet_query(frame: Any, out: Path, checkpoint: Path, *, available_now: bool) -> Any:
    """Start a Parquet sink; with available_now it is waited for, else left running."""
    writer = frame.writeStream.format("parquet").option("path", str(out))
    writer = writer.option("checkpointLocation", str(checkpoint))
    if available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return query
    return writer.trigger(processingTime="200 milliseconds").start()


def parquet_rows(spark: Any, out: Path) -> list[tuple[str, int, bytes]]:
    """(channel, sequence, data) of what a query wrote to ``out``."""
    frame = spark.read.parquet(str(out))
    return [(r.channel, r.sequence, bytes(r.data)) for r in frame.collect()]
