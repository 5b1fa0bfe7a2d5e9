"""Ports for the servers the tests start.

A port the kernel hands out for ``bind(0)`` is an ephemeral one: between the test choosing
it and a server binding it, any outgoing connection (a client, a nats-server route) may
take it as its local port, and the server fails with "address already in use". Ports are
therefore drawn below the kernel's ephemeral range, never the same twice in one run.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from pathlib import Path

__all__ = ["free_port"]

_handed_out: set[int] = set()
_random = random.Random()


def _ephemeral_start() -> int:
    try:
        low, _high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low)
    except (OSError, ValueError):
        return 32768  # Linux's default


_LOW = 20000
_HIGH = max(_LOW + 1000, _ephemeral_start())


def free_port() -> int:
    """A loopback TCP port nobody listens on now, outside the ephemeral range."""
    for _ in range(1000):
        port = _random.randrange(_LOW, _HIGH)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in [{_LOW}, {_HIGH})")


async def wait_until_accepting(port: int, *, every: float, within: float) -> bool:
    """Poll 127.0.0.1:``port`` every ``every`` seconds (0: as fast as the loop turns, as a
    client suite's harness does) until it accepts a connection; False after ``within``."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(every)
            continue
        writer.close()
        return True
    return False
