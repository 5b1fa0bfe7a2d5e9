"""The Go reference on a separate nats-server: stanpkg's topology, for the ``go-ns`` side.

    python go_on_nats.py NATS_SERVER NSS -a HOST -p PORT [server flags...]

starts ``NATS_SERVER -a HOST -p PORT`` and, once it accepts connections, becomes ``NSS -ns
nats://HOST:PORT [server flags...]`` (exec: the harness signals and measures the Go
server as the process it started, and the nats-server as its child, as for stanpkg).
The nats-server dies with it (PR_SET_PDEATHSIG). The Go server embeds NATS in its own
process; stanpkg's server is a Python process beside a nats-server, one more hop per
message. This side shows what that hop costs the Go server itself.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

__all__ = ["nss_argv", "split_listen_args"]

_READY_TIMEOUT = 10.0


def split_listen_args(args: list[str]) -> tuple[str, str, list[str]]:
    """(host, port, the other flags) of the harness's ``-a HOST -p PORT ...``."""
    host, port, rest = "127.0.0.1", "", []
    items = iter(args)
    for arg in items:
        if arg == "-a":
            host = next(items)
        elif arg == "-p":
            port = next(items)
        else:
            rest.append(arg)
    if not port:
        raise SystemExit("go_on_nats.py: -p PORT is required")
    return host, port, rest


def nss_argv(nss: str, host: str, port: str, rest: list[str]) -> list[str]:
    """A Python script (the floor's py_acker.py) runs under this interpreter."""
    program = [sys.executable, nss] if nss.endswith(".py") else [nss]
    return [*program, "-ns", f"nats://{host}:{port}", *rest]


def _die_with_parent() -> None:  # runs in the child, before exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_listening(host: str, port: int, nats: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT
    while time.monotonic() < deadline:
        if nats.poll() is not None:
            raise SystemExit(f"go_on_nats.py: nats-server exited ({nats.returncode})")
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("go_on_nats.py: nats-server did not listen in time")


def main(argv: list[str]) -> None:
    nats_server, nss, *args = argv
    host, port, rest = split_listen_args(args)
    nats = subprocess.Popen(
        [nats_server, "-a", host, "-p", port],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,  # safe: no threads here yet
    )
    _wait_listening(host, int(port), nats)
    argv = nss_argv(nss, host, port, rest)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
