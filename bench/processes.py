"""What every benchmark script does with the servers it starts: a free loopback port, and
a graceful stop that cannot hang (SIGINT, then SIGKILL after 30 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

# The tests' ports: drawn below the kernel's ephemeral range, so that no outgoing
# connection (a client, a nats-server route) takes one before its server binds it.
# The project's root on the path, as it is for the tests: one module, one set of ports.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)
from tests.ports import free_port  # noqa: E402

__all__ = ["free_port", "stop_server", "tree_cpu"]


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def tree_cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds used so far by the process trees rooted at ``pids``: the embedded
    nats-servers apart ("nats-server"), every other process as "node"."""
    ticks = os.sysconf("SC_CLK_TCK")
    totals = {"node": 0.0, "nats-server": 0.0}
    todo = list(pids)
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # gone meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 (state) on
        used = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        totals["nats-server" if name == "nats-server" else "node"] += used
    return totals
