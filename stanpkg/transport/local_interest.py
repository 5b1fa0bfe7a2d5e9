"""Whether a subject has a subscriber among a nats-server's own client connections.

Asked of the server's HTTP monitor on its private loopback port
(``EmbeddedNatsConfig.internal_monitor_port``): ``/connz?subs=detail&filter_subject=S``
lists the server's client connections with a subscription matching S (in the global
account, where the server's users are). Interest a route brings from another server of
the cluster is not listed, which is what tells a client's own server from the others.
Only a subscription to S itself counts: a tool subscribed to ``>`` matches every subject.

One GET of a small JSON document on loopback, written here by hand: an HTTP client
library (aiohttp) would cost the node its import time for this one request.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

__all__ = ["has_local_subscriber"]


async def has_local_subscriber(port: int, subject: str, timeout: float = 1.0) -> bool:
    """True if a client connection of the nats-server monitored on 127.0.0.1:``port``
    subscribes to ``subject``. Raises OSError, TimeoutError or ValueError when the
    monitor cannot tell."""
    return await asyncio.wait_for(_ask(port, subject), timeout)


async def _ask(port: int, subject: str) -> bool:
    path = f"/connz?acc=%24G&subs=detail&filter_subject={quote(subject, safe='')}"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        response = await reader.read()  # HTTP/1.0: the body ends with the connection
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    if not head.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200")):
        raise ValueError(f"nats-server's monitor answered {head[:40]!r}")
    connz = json.loads(body)
    return any(
        sub.get("subject") == subject
        for conn in connz.get("connections") or ()
        for sub in conn.get("subscriptions_list_detail") or ()
    )
