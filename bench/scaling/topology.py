"""The servers under test. stanpkg: one external nats-server and K ``stanpkg run``
processes on it, each with a partitioning config that gives it every K-th channel (all on
the same cluster ID, as the Go server's partitioning prescribes). Go: one
nats-streaming-server with its NATS embedded, serving every channel."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from processes import free_port, stop_server

from stanpkg.transport import find_nats_server_binary

ROOT = Path(__file__).resolve().parents[2]
RUN = "import sys; from stanpkg.cli import main; sys.exit(main())"
CLUSTER_ID = "bench"
READY = b"Streaming Server is ready"
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class Running:
    url: str
    pids: dict[str, int]  # label (go, nats-server, stanpkg-0, ...) -> pid


def channel_names(instances: int) -> list[str]:
    return [f"scale.{i}" for i in range(instances)]


def partition(channels: list[str], processes: int) -> list[list[str]]:
    """Every K-th channel to each process, so C channels split as evenly as they can."""
    return [channels[k::processes] for k in range(processes)]


def partition_config(channels: list[str]) -> str:
    entries = ", ".join(f'"{name}": {{}}' for name in channels)
    return f"partitioning: true\nstore_limits: {{ channels: {{ {entries} }} }}\n"


def _wait_ready(proc: subprocess.Popen[bytes], what: str) -> None:
    """Read stderr up to the ready line, then keep draining it so the pipe never fills."""
    assert proc.stderr is not None
    timer = threading.Timer(START_TIMEOUT, proc.kill)
    timer.start()
    try:
        for line in proc.stderr:
            if READY in line:
                break
        else:
            raise RuntimeError(f"{what} did not start (exit {proc.poll()})")
    finally:
        timer.cancel()
    threading.Thread(target=proc.stderr.read, daemon=True).start()


def _start_nats(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """nats-server on a free port; ready when it accepts connections."""
    port = free_port()
    log = open(workdir / "nats.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [find_nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return proc, f"nats://127.0.0.1:{port}"
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    stop_server(proc)
    raise RuntimeError("nats-server did not start")


@contextlib.contextmanager
def stanpkg_partitions(processes: int, instances: int, workdir: Path) -> Iterator[Running]:
    """nats-server + ``processes`` stanpkg processes sharing ``instances`` channels."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        nats, url = _start_nats(workdir)
        started.append(nats)
        pids = {"nats-server": nats.pid}
        for k, channels in enumerate(partition(channel_names(instances), processes)):
            conf = workdir / f"partition-{k}.conf"
            conf.write_text(partition_config(channels))
            argv = [str(ROOT / ".venv/bin/python"), "-c", RUN, "run", "-ns", url]
            argv += ["-cid", CLUSTER_ID, "-st", "memory", "-sc", str(conf)]
            proc = subprocess.Popen(
                argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            started.append(proc)
            _wait_ready(proc, f"stanpkg partition {k}")
            pids[f"stanpkg-{k}"] = proc.pid
        yield Running(url, pids)
    finally:
        for proc in reversed(started):  # the streaming servers before their NATS
            stop_server(proc)


@contextlib.contextmanager
def go_server(reference: Path) -> Iterator[Running]:
    port = free_port()
    argv = [str(reference / "nats-streaming-server"), "-a", "127.0.0.1", "-p", str(port)]
    argv += ["-cid", CLUSTER_ID, "-st", "memory"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_ready(proc, "nats-streaming-server")
        yield Running(f"nats://127.0.0.1:{port}", {"go": proc.pid})
    finally:
        stop_server(proc)
