"""The floor of a sync publish's round trip for a Python (asyncio) streaming server beside
a separate nats-server: connect, ping and close answered, every PubMsg acknowledged at
once; no store, no channel, no subscription state. ``bench/side_by_side.py --floor`` runs
it as the side "pyacker-ns" (through go_on_nats.py, which starts its nats-server):

    python py_acker.py -ns nats://HOST:PORT -cid CLUSTER [other server flags, ignored]

Speaks the NATS client protocol itself, in the fewest steps: the point is what is left
when a server does nothing, so no client library's machinery is wanted here.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from urllib.parse import urlsplit

from stanpkg.proto.protocol_pb2 import (
    CloseResponse,
    ConnectResponse,
    PingResponse,
    PubAck,
    PubMsg,
)

PREFIX = "_STAN.pyacker."
READY = "Streaming Server is ready"  # what the harness waits for on stderr


def _answers(cluster_id: str) -> dict[bytes, tuple[str, object]]:
    """sid -> (subject, what to answer: a message or PubAck for a PubMsg)."""
    connect = ConnectResponse(
        pubPrefix=PREFIX + "pub",
        subRequests=PREFIX + "sub",
        unsubRequests=PREFIX + "unsub",
        closeRequests=PREFIX + "close",
        subCloseRequests=PREFIX + "subclose",
        pingRequests=PREFIX + "ping",
        pingInterval=5,
        pingMaxOut=3,
        protocol=1,
    )
    return {
        b"1": (f"_STAN.discover.{cluster_id}", connect),
        b"2": (PREFIX + "pub.>", PubAck),
        b"3": (PREFIX + "close", CloseResponse()),
        b"4": (PREFIX + "ping", PingResponse()),
    }


class Acker(asyncio.Protocol):
    def __init__(self, cluster_id: str, ready: asyncio.Future[None]) -> None:
        self.answers = _answers(cluster_id)
        self.ready = ready
        self.pending = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        subs = "".join(
            f"SUB {subject} {sid.decode()}\r\n" for sid, (subject, _) in self.answers.items()
        )
        transport.write(f'CONNECT {{"verbose":false,"pedantic":false}}\r\n{subs}PING\r\n'.encode())

    def data_received(self, data: bytes) -> None:
        buf, pos, out = self.pending + data, 0, []
        while (end := buf.find(b"\r\n", pos)) >= 0:
            line = buf[pos:end]
            if line.startswith(b"MSG "):  # MSG subject sid reply size
                _, _, sid, reply, size = line.split(b" ")
                stop = end + 2 + int(size)
                if len(buf) < stop + 2:
                    break
                out.append(self._answer(sid, reply, buf[end + 2 : stop]))
                pos = stop + 2
                continue
            pos = end + 2
            if line == b"PING":
                out.append(b"PONG\r\n")
            elif line == b"PONG" and not self.ready.done():
                self.ready.set_result(None)
            elif line.startswith(b"-ERR"):
                raise SystemExit(line.decode())
        self.pending = buf[pos:]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))

    def _answer(self, sid: bytes, reply: bytes, payload: bytes) -> bytes:
        answer = self.answers[sid][1]
        if answer is PubAck:
            body = PubAck(guid=PubMsg.FromString(payload).guid).SerializeToString()
        else:
            body = answer.SerializeToString()  # type: ignore[attr-defined]
        return b"PUB %s %d\r\n%s\r\n" % (reply, len(body), body)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(exc or ConnectionError("nats-server closed"))


async def serve(url: str, cluster_id: str) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    parts = urlsplit(url)
    await loop.create_connection(
        lambda: Acker(cluster_id, ready), parts.hostname or "127.0.0.1", parts.port or 4222
    )
    await ready
    print(READY, file=sys.stderr, flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


def main(argv: list[str]) -> None:
    def flag(name: str, default: str) -> str:  # among the harness's other server flags
        return argv[argv.index(name) + 1] if name in argv[:-1] else default

    asyncio.run(serve(flag("-ns", "nats://127.0.0.1:4222"), flag("-cid", "test-cluster")))


if __name__ == "__main__":
    main(sys.argv[1:])
