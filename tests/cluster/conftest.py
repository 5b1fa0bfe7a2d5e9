"""Clustered mode on JetStream: real ``stanpkg run`` nodes (embedded nats-server with
JetStream, or an external one), real clients."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.server.conftest import (  # noqa: F401 - fixtures and the async-test hook
    nats_url,
    new_cluster_id,
    pytest_pyfunc_call,
    start_nats_process,
)
from tests.stores.file.helpers import ServerProcess
from tests.transport.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
STANPKG = [sys.executable, "-c", "import sys; from stanpkg.cli import main; sys.exit(main())"]
READY = "Streaming Server is ready"
# A PubAck waited for by a test client publishing a channel's first message of a
# leadership: it waits for the move of its shared stream's JetStream leader to the serving
# node, started at promotion (up to LeaderGathering's MOVE_WITHIN, 3 s; longer on a loaded
# 2-core CI host). Real STAN clients wait 30 s by default; the test client's 2 s is for a
# standalone server.
FIRST_WRITE_TIMEOUT = 15.0
LEADER = "server became leader"


@dataclass
class Node(ServerProcess):
    """One ``stanpkg run`` of a cluster: ``port`` is its NATS client port, ``monitor`` its
    monitoring port; a restarted node appends to the same log, read from ``log_start``."""

    name: str = ""
    monitor: int = 0
    log_start: int = 0

    def log(self) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")

    def http(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}{path}", timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def kill_with_its_nats_server(self) -> None:
        """kill -9 of the streaming process and of its embedded nats-server together,
        as when the machine dies."""
        children = subprocess.run(
            ["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True
        ).stdout.split()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()


class Cluster:
    """Nodes started in one temporary directory; all stopped at the end."""

    def __init__(self, tmp: Path, cluster_id: str) -> None:
        self.tmp = tmp
        self.cluster_id = cluster_id
        self.nodes: list[Node] = []

    def start(self, name: str, args: list[str], *, port: int = 0) -> Node:
        monitor = free_port()
        port = port or free_port()
        log_path = self.tmp / f"{name}.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        environment = {k: v for k, v in os.environ.items() if not k.startswith("NATS_STREAMING")}
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [
                    *STANPKG,
                    "run",
                    "-a",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-m",
                    str(monitor),
                    "-cid",
                    self.cluster_id,
                    *args,
                ],
                cwd=self.tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environment,
            )
        node = Node(proc, port, log_path, name=name, monitor=monitor, log_start=log_start)
        self.nodes.append(node)
        return node

    def stop_all(self) -> None:
        for node in self.nodes:
            if node.proc.poll() is None:
                node.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path, new_cluster_id())
    yield made
    for node in made.nodes:
        if node.proc.poll() is None:
            node.kill_with_its_nats_server()


@pytest.fixture
def jetstream_url(tmp_path: Path) -> Iterator[str]:
    """An external nats-server with JetStream (its state in the test's directory)."""
    proc, url = start_nats_process(
        tmp_path / "external", f'jetstream {{ store_dir: "{tmp_path / "external" / "js"}" }}'
    )
    yield url
    proc.terminate()
    proc.wait(10)


def three_node_args(cluster: Cluster) -> dict[str, list[str]]:
    """The Go flags of a 3-node cluster on this host: a of a, b, c and so on."""
    routes = {name: free_port() for name in "abc"}
    args = {}
    for name in "abc":
        others = [n for n in "abc" if n != name]
        args[name] = [
            "-cluster",
            f"nats://127.0.0.1:{routes[name]}",
            "-routes",
            ",".join(f"nats://127.0.0.1:{routes[o]}" for o in others),
            "-clustered",
            "-cluster_node_id",
            name,
            "-cluster_peers",
            ",".join(others),
            "-store",
            "file",
            "-dir",
            f"{name}/store",
            "-cluster_log_path",
            f"{name}/raft",
        ]
    return args
