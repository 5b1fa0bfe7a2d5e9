"""What every load script shares: a real nats-server and a real stanpkg server process on
it, a sampler of the stanpkg process (RSS, open files, CPU from /proc), the monitoring
endpoints, and connecting fast STAN clients (stanpkg/client.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/processes.py

from processes import free_port, stop_server

from stanpkg.client import StanBenchClient
from stanpkg.transport import NatsConnection

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
CLUSTER_ID = "load"
# every run's samples and summary, and plot.py's charts (bench/results/ is not committed)
DATA = ROOT / "bench" / "results" / "load"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass
class Servers:
    nats_url: str
    monitor_url: str
    stan: subprocess.Popen[bytes]
    ready_seconds: float
    log_path: Path


def _wait_ready(proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if b"Streaming Server is ready" in log_path.read_bytes():
            return time.perf_counter() - start
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    raise RuntimeError(f"stanpkg did not start; see {log_path}")


def start_stan(nats_url: str, args: list[str], workdir: Path, timeout: float = 300) -> Servers:
    """A stanpkg server process on ``nats_url``; its log goes to a file (a pipe nobody
    reads would block it). ``ready_seconds``: from exec to "Streaming Server is ready"."""
    http_port = free_port()
    log_path = workdir / f"stan-{http_port}.log"
    log = log_path.open("wb")
    argv = [str(BIN / "nats-streaming-server"), "-ns", nats_url, "-cid", CLUSTER_ID]
    proc = subprocess.Popen(
        [*argv, "-m", str(http_port), *args],
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    ready = _wait_ready(proc, log_path, timeout)
    return Servers(nats_url, f"http://127.0.0.1:{http_port}", proc, ready, log_path)


@contextmanager
def servers(args: list[str], workdir: Path | None = None) -> Iterator[Servers]:
    """A nats-server and a stanpkg server on it (MEMORY store unless ``args`` say)."""
    with tempfile.TemporaryDirectory(prefix="stanpkg-load-") as tmp:
        work = workdir or Path(tmp)
        port = free_port()
        nats = subprocess.Popen(
            [str(BIN / "nats-server"), "-a", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"nats://127.0.0.1:{port}"
            started = start_stan(url, args, work)
            try:
                yield started
            finally:
                stop_server(started.stan)
        finally:
            stop_server(nats)


def monitor(base: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base}{path}", timeout=30) as resp:
        return json.loads(resp.read())


# -- the stanpkg process, from /proc -----------------------------------------------------
def rss_mb(pid: int) -> float:
    fields = Path(f"/proc/{pid}/statm").read_text().split()
    return int(fields[1]) * PAGE_KB / 1024


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass
class Sample:
    t: float
    rss_mb: float
    open_files: int
    cpu_percent: float
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 2),
            "rss_mb": round(self.rss_mb, 1),
            "open_files": self.open_files,
            "cpu_percent": round(self.cpu_percent, 1),
            **self.extra,
        }


class Sampler:
    """Samples the server every ``period`` seconds on the event loop; ``extra()`` adds
    the script's own columns (rates, latency) to each sample."""

    def __init__(self, pid: int, period: float = 1.0, extra: Any = None) -> None:
        self.pid = pid
        self.period = period
        self.samples: list[Sample] = []
        self._extra = extra
        self._start = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def take(self) -> Sample:
        return Sample(time.monotonic() - self._start, rss_mb(self.pid), open_files(self.pid), 0.0)

    async def _run(self) -> None:
        last_t, last_cpu = time.monotonic(), cpu_seconds(self.pid)
        while True:
            await asyncio.sleep(self.period)
            now, cpu = time.monotonic(), cpu_seconds(self.pid)
            sample = self.take()
            sample.cpu_percent = 100 * (cpu - last_cpu) / (now - last_t)
            if self._extra is not None:
                sample.extra = self._extra()
            self.samples.append(sample)
            last_t, last_cpu = now, cpu

    def __enter__(self) -> Sampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for sample in self.samples:
                out.write(json.dumps(sample.row()) + "\n")


async def stan_client(nats_url: str, client_id: str) -> StanBenchClient:
    """A STAN client on its own NATS connection, as a separate application would have."""
    nc = await NatsConnection.connect(nats_url, name=client_id, max_reconnect=0)
    return await StanBenchClient.connect(nc, CLUSTER_ID, client_id, timeout=30)


async def close_client(client: StanBenchClient) -> None:
    await client.close(timeout=30)
    await client.nc.close()


def emit(result: dict[str, Any], path: Path | None = None) -> None:
    text = json.dumps(result, indent=1)
    print(text)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
