"""Streaming-server benchmark, after the reference's ``stan-bench``.

Starts ``stanpkg.node.run`` in a child process (embedded nats-server, MEMORY
store), then measures from a client built on the fast ``stanpkg.transport`` connection:

* ``async``: 1 publisher (async publish, up to 16384 PubAcks outstanding, like the Go
  client) and 1 subscriber (acking every message), at the same time;
* ``sync``: publish, wait for the PubAck, repeat;
* ``memory``: store N messages, report the server process's RSS.

* ``echo``: no streaming at all, a NATS request/reply round trip between two processes
  through the same nats-server: the floor ``sync`` can reach on this machine.

Usage: ``python bench/server/stan_bench.py [async|sync|echo|memory|all] [-n N] [-s SIZE]``
(``--url nats://...`` and ``--cluster-id`` to use a server that is already running).
Results go to stdout as one JSON object per scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.nuid import Nuid

ROOT = Path(__file__).resolve().parents[2]
MAX_PUB_ACKS = 16384


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int, cluster_id: str, extra: list[str]) -> subprocess.Popen[bytes]:
    code = (
        "import sys\n"
        "from stanpkg.plan.compile import compile_args\n"
        "from stanpkg.node import run\n"
        "sys.exit(run(compile_args(sys.argv[1:], env={}).plan))\n"
    )
    argv = [
        "-a",
        "127.0.0.1",
        "-p",
        str(port),
        "-cid",
        cluster_id,
        *extra,
        *os.environ.get("BENCH_SERVER_ARGS", "").split(),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    for raw in proc.stderr:
        if b"Streaming Server is ready" in raw:
            break
    else:
        raise RuntimeError("server did not start")
    return proc


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class BenchClient:
    """A minimal STAN client: connect, fast async publish, auto-acking subscriber."""

    def __init__(self, conn: NatsConnection, cluster_id: str, client_id: str) -> None:
        self.conn = conn
        self.cluster_id = cluster_id
        self.client_id = client_id
        self.nuid = Nuid()
        self.conn_id = self.nuid.next().encode()
        self.resp = pb.ConnectResponse()

    async def connect(self) -> None:
        hb_inbox = self.conn.new_inbox()
        self.conn.subscribe(hb_inbox, lambda _s, reply, _p: self.conn.publish(reply, b""))
        req = pb.ConnectRequest(
            clientID=self.client_id,
            heartbeatInbox=hb_inbox,
            protocol=1,
            connID=self.conn_id,
            pingInterval=5,
            pingMaxOut=88,
        )
        raw = await self.conn.request(
            f"_STAN.discover.{self.cluster_id}", req.SerializeToString(), 5
        )
        self.resp = pb.ConnectResponse.FromString(raw)
        if self.resp.error:
            raise RuntimeError(self.resp.error)

    def pub_prefix(self, channel: str, data: bytes) -> tuple[bytes, bytes]:
        """The PubMsg bytes around the guid (the only field that changes)."""
        before = pb.PubMsg(clientID=self.client_id).SerializeToString() + b"\x12\x16"
        after = pb.PubMsg(subject=channel, data=data, connID=self.conn_id).SerializeToString()
        return before, after

    async def subscribe(self, channel: str, on_seq: object) -> None:
        inbox = self.conn.new_inbox()
        ack_inbox = ""
        ack = pb.Ack(subject=channel)
        msg = pb.MsgProto()
        publish = self.conn.publish
        callback = on_seq

        def on_msg(_s: str, _r: str, payload: bytes) -> None:
            msg.ParseFromString(payload)
            ack.sequence = msg.sequence
            publish(ack_inbox, ack.SerializeToString())
            callback(msg.sequence)  # type: ignore[operator]

        self.conn.subscribe(inbox, on_msg)
        req = pb.SubscriptionRequest(
            clientID=self.client_id,
            subject=channel,
            inbox=inbox,
            maxInFlight=int(os.environ.get("BENCH_MAX_INFLIGHT", "1024")),
            ackWaitInSecs=30,
        )
        raw = await self.conn.request(self.resp.subRequests, req.SerializeToString(), 5)
        resp = pb.SubscriptionResponse.FromString(raw)
        if resp.error:
            raise RuntimeError(resp.error)
        ack_inbox = resp.ackInbox


class AckWindow:
    """Async publishing with at most MAX_PUB_ACKS PubAcks outstanding, like the Go client:
    ``on_ack`` is the ack inbox handler, ``publish_all`` sends ``n`` messages."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.acked = 0
        self.outstanding = 0
        self.room = asyncio.Event()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.last_ack = 0.0

    def on_ack(self, _s: str, _r: str, _payload: bytes) -> None:
        self.acked += 1
        self.outstanding -= 1
        if self.outstanding < MAX_PUB_ACKS // 2:
            self.room.set()
        if self.acked == self.n:
            self.last_ack = time.perf_counter()
            self.done.set_result(None)

    async def publish_all(
        self, conn: NatsConnection, subject: str, parts: tuple[bytes, bytes], nuid: Nuid, inbox: str
    ) -> None:
        """Each message is ``before + <guid> + after`` (see ``BenchClient.pub_prefix``)."""
        before, after = parts
        publish, n = conn.publish, self.n
        sent = 0
        while sent < n:
            burst = min(n - sent, MAX_PUB_ACKS - self.outstanding, 1024)
            for _ in range(burst):
                publish(subject, before + nuid.next().encode() + after, inbox)
            sent += burst
            self.outstanding += burst
            if self.outstanding >= MAX_PUB_ACKS:
                self.room.clear()
                await self.room.wait()
            else:
                await asyncio.sleep(0)


async def bench_async(url: str, cluster_id: str, n: int, size: int, subs: int) -> dict[str, object]:
    pub_conn = await NatsConnection.connect(url, name="bench-pub")
    sub_conn = await NatsConnection.connect(url, name="bench-sub")
    publisher = BenchClient(pub_conn, cluster_id, "bench-pub")
    await publisher.connect()
    loop = asyncio.get_running_loop()
    received = 0
    sub_done = loop.create_future()
    last_recv = 0.0

    def on_seq(_seq: int) -> None:
        nonlocal received, last_recv
        received += 1
        if received == n * subs:
            last_recv = time.perf_counter()
            if not sub_done.done():
                sub_done.set_result(None)

    for i in range(subs):
        subscriber = BenchClient(sub_conn, cluster_id, f"bench-sub-{i}")
        await subscriber.connect()
        await subscriber.subscribe("bench", on_seq)
    await sub_conn.flush()

    parts = publisher.pub_prefix("bench", os.urandom(size))
    subject = f"{publisher.resp.pubPrefix}.bench"
    ack_inbox = pub_conn.new_inbox()
    window = AckWindow(n)
    pub_conn.subscribe(ack_inbox, window.on_ack)
    await pub_conn.flush()
    start = time.perf_counter()
    await window.publish_all(pub_conn, subject, parts, publisher.nuid, ack_inbox)
    await asyncio.wait_for(window.done, 120)
    await asyncio.wait_for(sub_done, 120)
    await pub_conn.close()
    await sub_conn.close()
    pub_secs = window.last_ack - start
    sub_secs = last_recv - start
    return {
        "scenario": "async",
        "msgs": n,
        "size": size,
        "subscribers": subs,
        "pub_msgs_per_sec": round(n / pub_secs),
        "sub_msgs_per_sec": round(n * subs / sub_secs),
        "seconds": round(max(pub_secs, sub_secs), 2),
    }


async def bench_sync(url: str, cluster_id: str, n: int, size: int) -> dict[str, object]:
    conn = await NatsConnection.connect(url, name="bench-sync")
    client = BenchClient(conn, cluster_id, "bench-sync")
    await client.connect()
    before, after = client.pub_prefix("sync", os.urandom(size))
    subject = f"{client.resp.pubPrefix}.sync"
    start = time.perf_counter()
    for _ in range(n):
        raw = await conn.request(subject, before + client.nuid.next().encode() + after, 5)
        if pb.PubAck.FromString(raw).error:
            raise RuntimeError("publish failed")
    secs = time.perf_counter() - start
    await conn.close()
    return {"scenario": "sync", "msgs": n, "size": size, "msgs_per_sec": round(n / secs)}


ECHO_RESPONDER = (
    "import asyncio, sys\n"
    "from stanpkg.transport.connection import NatsConnection\n"
    "async def main():\n"
    "    c = await NatsConnection.connect(sys.argv[1])\n"
    "    c.subscribe('bench.echo', lambda s, r, p: c.publish(r, p[:24]))\n"
    "    await c.flush()\n"
    "    print('ready', flush=True)\n"
    "    await asyncio.sleep(3600)\n"
    "import uvloop; uvloop.run(main())\n"
)


async def bench_echo(url: str, n: int, size: int) -> dict[str, object]:
    """The floor for ``sync``: a plain NATS request/reply round trip between two
    processes through the same nats-server, no streaming server involved."""
    responder = subprocess.Popen(
        [sys.executable, "-c", ECHO_RESPONDER, url], cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert responder.stdout is not None
        responder.stdout.readline()
        conn = await NatsConnection.connect(url, name="bench-echo")
        payload = os.urandom(size + 60)  # about a PubMsg
        start = time.perf_counter()
        for _ in range(n):
            await conn.request("bench.echo", payload, 5)
        secs = time.perf_counter() - start
        await conn.close()
    finally:
        responder.kill()
        responder.wait()
    return {"scenario": "echo", "msgs": n, "size": size, "requests_per_sec": round(n / secs)}


async def bench_memory(url: str, cluster_id: str, n: int, size: int, pid: int) -> dict[str, object]:
    idle = rss_mb(pid)
    result = await bench_async_publish_only(url, cluster_id, n, size)
    await asyncio.sleep(1.0)
    stored = rss_mb(pid)
    return {
        "scenario": "memory",
        "msgs": n,
        "size": size,
        "rss_idle_mb": round(idle, 1),
        "rss_stored_mb": round(stored, 1),
        "pub_msgs_per_sec": result,
    }


async def bench_async_publish_only(url: str, cluster_id: str, n: int, size: int) -> int:
    conn = await NatsConnection.connect(url, name="bench-fill")
    client = BenchClient(conn, cluster_id, "bench-fill")
    await client.connect()
    parts = client.pub_prefix("fill", os.urandom(size))
    subject = f"{client.resp.pubPrefix}.fill"
    inbox = conn.new_inbox()
    window = AckWindow(n)
    conn.subscribe(inbox, window.on_ack)
    start = time.perf_counter()
    await window.publish_all(conn, subject, parts, client.nuid, inbox)
    await asyncio.wait_for(window.done, 300)
    rate = round(n / (time.perf_counter() - start))
    await conn.close()
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "scenario", choices=["async", "sync", "echo", "memory", "all"], default="all", nargs="?"
    )
    parser.add_argument("-n", "--msgs", type=int, default=0)
    parser.add_argument("-s", "--size", type=int, default=128)
    parser.add_argument("--subs", type=int, default=1)
    parser.add_argument("--url", default="")
    parser.add_argument("--cluster-id", default="bench")
    args = parser.parse_args()
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover
        loop_factory = None  # type: ignore[assignment]
    scenarios = ["async", "sync", "echo", "memory"] if args.scenario == "all" else [args.scenario]
    for scenario in scenarios:
        server = None
        url = args.url
        if not url:
            port = _free_port()
            server = start_server(port, args.cluster_id, [])
            url = f"nats://127.0.0.1:{port}"
        try:
            cpu_before = cpu_seconds(server.pid) if server is not None else 0.0
            with asyncio.Runner(loop_factory=loop_factory) as runner:
                if scenario == "async":
                    result = runner.run(
                        bench_async(
                            url, args.cluster_id, args.msgs or 200_000, args.size, args.subs
                        )
                    )
                elif scenario == "echo":
                    result = runner.run(bench_echo(url, args.msgs or 5_000, args.size))
                elif scenario == "sync":
                    result = runner.run(
                        bench_sync(url, args.cluster_id, args.msgs or 10_000, args.size)
                    )
                else:
                    assert server is not None, "memory needs the server started here"
                    result = runner.run(
                        bench_memory(
                            url, args.cluster_id, args.msgs or 1_000_000, args.size, server.pid
                        )
                    )
            if server is not None and scenario != "echo":
                used = cpu_seconds(server.pid) - cpu_before
                msgs = int(str(result["msgs"]))
                result["server_cpu_us_per_msg"] = round(used / msgs * 1e6, 1)
            print(json.dumps(result), flush=True)
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
