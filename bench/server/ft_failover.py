"""Fault-tolerant failover time: SIGKILL the active server of an ``ft_group`` pair and
time until the standby logs ``Streaming Server is ready`` (it has taken the store lock and
recovered the store).

    python bench/server/ft_failover.py [--store file|sqlite] [--msgs N] [--rounds R]

A nats-server and two ``stanpkg run`` processes are started on loopback; ``--msgs``
messages of 128 B are published first (``stanpkg bench``), so the time includes their
recovery. After each kill the dead server is started again as the new standby.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stanpkg.transport import find_nats_server_binary

ROOT = Path(__file__).resolve().parents[2]
STANPKG = [sys.executable, "-c", "import sys; from stanpkg.cli import main; sys.exit(main())"]
READY = "Streaming Server is ready"


def start_nats(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = 14222 + os.getpid() % 1000
    proc = subprocess.Popen(
        [find_nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    return proc, f"nats://127.0.0.1:{port}"


class Node:
    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        log.write_bytes(b"")
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([*STANPKG, "run", *args], stdout=out, stderr=out)

    def logged(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.logged(text):
                return time.monotonic()
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited:\n{self.log.read_text()}")
            time.sleep(0.005)
        raise SystemExit(f"{text!r} not logged:\n{self.log.read_text()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=("file", "sqlite"), default="file")
    parser.add_argument("--msgs", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        nats, url = start_nats(tmp)
        store = (
            ["-st", "file", "--dir", str(tmp / "ds")]
            if opts.store == "file"
            else ["-st", "sql", "--sql_driver", "sqlite", "--sql_source", str(tmp / "s.db")]
        )
        args = ["-ns", url, "-cid", "ftbench", "--ft_group", "g", *store]
        try:
            nodes = [Node(args, tmp / "a.log")]
            nodes[0].wait_for(READY)
            nodes.append(Node(args, tmp / "b.log"))
            nodes[1].wait_for("Starting in standby mode")
            if opts.msgs:
                publish = ["-np", "1", "-ns", "0", "-n", str(opts.msgs), "-ms", "128"]
                subprocess.run(
                    [*STANPKG, "bench", "-s", url, "-c", "ftbench", *publish, "bench.ft"],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            times = []
            for round_no in range(opts.rounds):
                active, standby = nodes
                time.sleep(1.5)  # the standby has heard heartbeats for a while
                killed = time.monotonic()
                active.proc.send_signal(signal.SIGKILL)
                active.proc.wait()
                ready = standby.wait_for(READY)
                times.append(ready - killed)
                print(f"round {round_no + 1}: {times[-1]:.3f} s", flush=True)
                restarted = Node(args, active.log)
                restarted.wait_for("Starting in standby mode")
                nodes = [standby, restarted]
            print(
                f"{opts.store} store, {opts.msgs} messages: failover median "
                f"{statistics.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f})"
            )
        finally:
            for node in nodes:
                node.proc.kill()
            nats.kill()


if __name__ == "__main__":
    main()
