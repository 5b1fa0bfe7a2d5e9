"""What every benchmark script does with the servers it starts: a free loopback port, and
a graceful stop that cannot hang (SIGINT, then SIGKILL after 30 s)."""

from __future__ import annotations

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

__all__ = ["free_port", "stop_server"]


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
