"""The discover subject, claimed before the embedded nats-server reads a client's connection.

A client that polls the port and connects at once sends its connect request a round
trip or two after the port opens: sooner than the server's own connection, opened
then too, would have subscribed (it waits for NATS's INFO, then for its PONG). Raw
connections come first: nats-server, held between opening its port and accepting on it
(transport/log_gate.py), queues every connection unread while the thread that reads its
output opens several (:func:`connect_claims`). Each writes CONNECT, the twin probe (the
first one) and SUB in one write as it connects, without waiting for INFO, so the
subscription is read as soon as NATS accepts, while a client has yet to get its INFO.
Where nats-server cannot be held, the thread does that when the "Listening" line wakes
it, as the port opens: a race it wins but on a saturated machine. The twin probe is a
ping on the discover subject's ping subject, which a serving server answers and the
claims do not hold ("no responders" at once when no other server serves the cluster ID).

It only keeps what arrives. Once the server's own connection holds the subject
(early.py), the claim unsubscribes and hands its requests over, in order; a request
delivered to both is kept once (each connect request has its own reply subject).
Best effort: anything unexpected (a TLS or nonce-signed NATS, an error) closes it, and
the server's connection alone holds the subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

from stanpkg import __version__

__all__ = [
    "CLAIMS",
    "CLAIM_PATIENCE",
    "DiscoverClaim",
    "Kept",
    "claim_bytes",
    "connect_claims",
    "merge",
]

Kept = tuple[str, str, bytes]  # (subject, reply, data)
_PROBE_SID, _DISCOVER_SID = b"1", b"2"
_MAX_KEPT_BYTES = 64 * 1024 * 1024
CLAIMS = 3  # connections holding the subject (watch)
PROBE_WAIT = 0.25  # for another server's answer (modes/standalone.py's PROBE_TIMEOUT)
# How long a held nats-server may take from the line before it listens to listening: a
# few hundred microseconds, far more on a loaded machine; waited out only when a line the
# gate did not expect holds it before (transport/log_gate.py).
CLAIM_PATIENCE = 0.5
_SPIN, _PAUSE = 0.005, 0.0005


def claim_bytes(
    discovery: str, probe: tuple[str, bytes] | None, auth: dict[str, str], probe_inbox: str
) -> bytes:
    """CONNECT, the probe (``(subject, payload)``, its reply inbox subscribed first), the
    SUB and a PING, in one write."""
    fields = {"verbose": False, "pedantic": False, "name": "_NSS-claim", "lang": "python"}
    fields |= {"version": __version__, "protocol": 1, "headers": True, "no_responders": True}
    inbox, subject = probe_inbox.encode(), discovery.encode()
    out = b"CONNECT " + json.dumps(fields | auth).encode() + b"\r\n"
    if probe is not None:
        to, data = probe[0].encode(), probe[1]
        out += b"SUB %s %s\r\n" % (inbox, _PROBE_SID)
        out += b"PUB %s %s %d\r\n%s\r\n" % (to, inbox, len(data), data)
    return out + b"SUB %s %s\r\nPING\r\n" % (subject, _DISCOVER_SID)


def connect_claims(
    host: str, port: int, payloads: list[bytes], *, within: float = 0.0
) -> list[socket.socket]:
    """A connection to ``host:port`` for each of ``payloads``, written at once (blocking:
    from the thread that saw the port open); those that failed are left out. The port
    refusing, the first is tried again for ``within`` seconds (nats-server held before
    it accepts may not have opened it yet: transport/log_gate.py).

    Several connections: nats-server runs each connection's first read in a goroutine
    of its own, and under load one can wait while a client's round trips go through;
    the first of them read holds the subject."""
    deadline = time.monotonic() + within
    spin_until = time.monotonic() + _SPIN  # then tried every _PAUSE: no core burnt
    socks: list[socket.socket] = []
    for payload in payloads:
        while True:
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            try:
                sock.settimeout(1.0)
                sock.connect((host, port))
                sock.sendall(payload)
            except ConnectionRefusedError:
                sock.close()
                if socks or time.monotonic() >= deadline:
                    break
                # At once at first: ahead of a client polling the port.
                time.sleep(0 if time.monotonic() < spin_until else _PAUSE)
                continue
            except OSError:
                sock.close()
                break
            socks.append(sock)
            break
    return socks


def merge(kept: list[list[Kept]]) -> list[Kept]:
    """The requests several claims kept, each once (by reply subject), in their order."""
    seen: set[str] = set()
    merged: list[Kept] = []
    for requests in kept:
        for request in requests:
            if request[1] not in seen:
                seen.add(request[1])
                merged.append(request)
    return merged


class DiscoverClaim:
    """``DiscoverClaim.open(...)`` (synchronous, no await between the port and the SUB),
    then :meth:`twin_answered` and :meth:`hand_over` from the event loop."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = bytearray()
        self._kept: list[Kept] = []
        self._bytes = 0
        self._pong: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._probe: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._reader: asyncio.Task[None] | None = None
        self.failed = False

    @classmethod
    def adopt(cls, sock: socket.socket, *, probed: bool) -> DiscoverClaim:
        """The claim of ``sock``, connected and written to."""
        sock.setblocking(False)
        claim = cls(sock)
        if not probed:
            claim._probe.set_result(False)
        claim._reader = asyncio.get_running_loop().create_task(claim._read())
        return claim

    async def twin_answered(self, timeout: float = PROBE_WAIT) -> bool:
        """Whether another server answered the probe ("no responders" comes at once)."""
        try:
            return await asyncio.wait_for(asyncio.shield(self._probe), timeout)
        except (TimeoutError, ConnectionError):
            return False

    async def hand_over(self, timeout: float = 2.0) -> list[Kept]:
        """Unsubscribe, and once NATS confirms it, close: what was kept, in order."""
        if not self.failed:
            with contextlib.suppress(OSError, TimeoutError, ConnectionError):
                self._pong = asyncio.get_running_loop().create_future()
                await asyncio.get_running_loop().sock_sendall(
                    self._sock, b"UNSUB %s\r\nPING\r\n" % _DISCOVER_SID
                )
                await asyncio.wait_for(asyncio.shield(self._pong), timeout)
        self.close()
        return self._kept

    def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        self._sock.close()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                data = await loop.sock_recv(self._sock, 65536)
                if not data:
                    raise ConnectionError("closed")
                self._buf += data
                while self._parse_one():
                    pass
        except (OSError, ConnectionError, ValueError) as exc:
            self.failed = True
            for waiter in (self._pong, self._probe):
                if not waiter.done():
                    waiter.set_exception(ConnectionError(str(exc)))

    def _parse_one(self) -> bool:
        """Handle the first complete protocol line (and its payload); False if none."""
        buf = self._buf
        end = buf.find(b"\r\n")
        if end < 0:
            return False
        head = bytes(buf[:end]).split()
        op = head[0].upper() if head else b""
        if op in (b"MSG", b"HMSG"):
            size = int(head[-1])
            start = end + 2
            if len(buf) < start + size + 2:
                return False
            payload = bytes(buf[start : start + size])
            del buf[: start + size + 2]
            self._message(op, head, payload)
            return True
        del buf[: end + 2]
        if op == b"PING":
            self._sock.send(b"PONG\r\n")
        elif op == b"PONG":
            if not self._pong.done():
                self._pong.set_result(None)
        elif op == b"-ERR":
            raise ConnectionError(" ".join(part.decode() for part in head))
        return True  # INFO, +OK

    def _message(self, op: bytes, head: list[bytes], payload: bytes) -> None:
        subject, sid = head[1].decode(), head[2]
        reply = head[3].decode() if len(head) == (6 if op == b"HMSG" else 5) else ""
        if sid == _PROBE_SID:
            # An answer is a twin; a header-only status (503, no responders) is not.
            if not self._probe.done():
                self._probe.set_result(op == b"MSG")
            return
        if op == b"HMSG":
            return  # clients' connect requests carry no headers
        if self._bytes + len(payload) > _MAX_KEPT_BYTES:
            return
        self._bytes += len(payload)
        self._kept.append((subject, reply, payload))
