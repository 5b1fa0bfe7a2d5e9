"""Scenarios run with the real Python STAN client from PyPI against a stanpkg server.

Usage (with the client's own virtual environment, see requirements.txt and conftest.py):

    python stan_scenarios.py <scenario> <nats_url> <cluster_id>

The client is ``asyncio-nats-streaming`` 0.4.0 (module ``stan``) over ``asyncio-nats-client``
0.11.5 (module ``nats``, which conflicts with nats-py 2.x: never install it in the project
venv). It connects with protocol 1 (``ConnectRequest.protocol = 1``, a connID, client PINGs
every ``ping_interval`` seconds). Each scenario prints exactly one JSON object as the last
stdout line: ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": "..."}``; the pytest
side asserts on the result. Every wait is bounded, so a scenario never hangs.

This script runs under the old client's interpreter: it must not import the project.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

# -- compatibility shim: asyncio-nats-client 0.11.5 and asyncio-nats-streaming 0.4.0 pass
# ``loop=`` to asyncio.Queue/sleep/wait_for/open_connection, which Python 3.10 removed (a
# known incompatibility of these unmaintained packages, not a server matter). Drop the
# argument; the objects bind to the running loop, which is the one they were given anyway.


def _drop_loop(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("loop", None)
        return func(*args, **kwargs)

    return wrapper


class _Queue(asyncio.Queue):  # type: ignore[type-arg]
    def __init__(self, maxsize: int = 0, *, loop: Any = None) -> None:
        super().__init__(maxsize)


asyncio.Queue = _Queue  # type: ignore[misc]
asyncio.sleep = _drop_loop(asyncio.sleep)
asyncio.wait_for = _drop_loop(asyncio.wait_for)
asyncio.open_connection = _drop_loop(asyncio.open_connection)

from nats.aio.client import Client as NATS  # noqa: E402
from stan.aio.client import Client as STAN  # noqa: E402
from stan.aio.client import Msg  # noqa: E402

WAIT = 10.0  # seconds: the bound of every wait
REQUEST_TIMEOUT = 8  # the client's connect/subscribe/close request timeout (default 2 s)
SETTLE = 0.4  # how long to watch for deliveries that must NOT happen

URL = ""
CLUSTER = ""


# -- helpers ------------------------------------------------------------------------------


class Conn:
    """One NATS connection with one STAN session on it."""

    def __init__(self, nc: Any, sc: Any, client_id: str) -> None:
        self.nc = nc
        self.sc = sc
        self.client_id = client_id
        self.lost: list[str] = []

    async def publish(self, channel: str, data: str, ack_wait: float = WAIT) -> Any:
        """Synchronous-style publish: returns the PubAck (the client does not raise on
        PubAck.error, it returns the PubAck)."""
        return await self.sc.publish(channel, data.encode(), ack_wait=ack_wait)

    async def close(self) -> None:
        try:
            await self.sc.close()
        finally:
            await self.nc.close()

    async def drop(self) -> None:
        """Close the NATS connection without telling the streaming server."""
        await self.nc.close()


async def connect(client_id: str, **kwargs: Any) -> Conn:
    nc = NATS()
    await nc.connect(
        servers=[URL],
        io_loop=asyncio.get_running_loop(),
        allow_reconnect=False,
        connect_timeout=REQUEST_TIMEOUT,
        name=f"stan-py-{client_id}",
    )
    sc = STAN()
    conn = Conn(nc, sc, client_id)

    async def lost(err: Exception) -> None:
        conn.lost.append(str(err))

    try:
        await sc.connect(
            CLUSTER,
            client_id,
            nats=nc,
            connect_timeout=REQUEST_TIMEOUT,
            conn_lost_cb=lost,
            **kwargs,
        )
    except BaseException:
        await nc.close()
        raise
    return conn


def redelivery_count(msg: Msg) -> int:
    """MsgProto field 7 (redeliveryCount): the client's bundled protobuf code predates it,
    so read it from the unknown fields (protobuf 3.20 keeps them)."""
    for field in msg.proto.UnknownFields():
        if field.field_number == 7:
            return int(field.data)
    return 0


def record(msg: Msg) -> dict[str, Any]:
    return {
        "seq": msg.sequence,
        "data": msg.data.decode(),
        "ts": msg.timestamp,
        "redelivered": bool(msg.proto.redelivered),
        "count": redelivery_count(msg),
        "subject": msg.proto.subject,
    }


class Collector:
    """A subscription callback that records every delivery (and optionally acks)."""

    def __init__(self, conn: Conn, ack_if: Callable[[Msg], bool] | None = None) -> None:
        self.conn = conn
        self.ack_if = ack_if
        self.received: list[dict[str, Any]] = []
        self.msgs: list[Msg] = []

    async def __call__(self, msg: Msg) -> None:
        self.received.append(record(msg))
        self.msgs.append(msg)
        if self.ack_if is not None and self.ack_if(msg):
            await self.conn.sc.ack(msg)

    async def wait(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        await wait_until(lambda: len(self.received) >= count, timeout)
        return list(self.received)

    def seqs(self) -> list[int]:
        return [m["seq"] for m in self.received]

    def flags(self) -> list[list[Any]]:
        return [[m["seq"], m["redelivered"]] for m in self.received]


async def wait_until(cond: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll ``cond``; return when true, raise after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.01)


async def subscribe(
    conn: Conn, channel: str, ack_if: Callable[[Msg], bool] | None = None, **kwargs: Any
) -> tuple[Any, Collector]:
    collector = Collector(conn, ack_if)
    sub = await conn.sc.subscribe(channel, cb=collector, **kwargs)
    return sub, collector


async def error_of(awaitable: Awaitable[Any]) -> str | None:
    """The text of the exception the client raises, or None if none."""
    try:
        await awaitable
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return None


async def publish_outcome(conn: Conn, channel: str, ack_wait: float) -> dict[str, Any]:
    """PubAck.error of a publish, or "timeout" when no PubAck came back."""
    try:
        ack = await conn.publish(channel, "x", ack_wait=ack_wait)
    except TimeoutError:  # asyncio.TimeoutError is TimeoutError since 3.11
        return {"timeout": True}
    return {"error": ack.error}


# -- scenarios ----------------------------------------------------------------------------


async def pubsub() -> dict[str, Any]:
    """Publishes with acks (awaited, then with an ack handler); a live subscriber and a
    deliver-all subscriber receive everything in order."""
    count = 50
    conn = await connect("py-pubsub")
    live_sub, live = await subscribe(conn, "ps")
    before = time.time_ns()
    sync_acks = []
    for i in range(count):
        ack = await conn.publish("ps", f"s{i}")
        sync_acks.append({"guid": ack.guid, "error": ack.error})
    async_acks: list[dict[str, str]] = []

    async def on_ack(ack: Any) -> None:
        async_acks.append({"guid": ack.guid, "error": ack.error})

    for i in range(count):
        await conn.sc.publish("ps", f"a{i}".encode(), ack_handler=on_ack)
    await wait_until(lambda: len(async_acks) >= count)
    after = time.time_ns()
    await live.wait(2 * count)
    _, replay = await subscribe(conn, "ps", deliver_all_available=True)
    await replay.wait(2 * count)
    await asyncio.sleep(SETTLE)
    await live_sub.unsubscribe()
    await conn.close()
    return {
        "before": before,
        "after": after,
        "sync_acks": sync_acks,
        "async_acks": async_acks,
        "live": live.received,
        "replay": replay.received,
        "lost": conn.lost,
    }


async def start_positions() -> dict[str, Any]:
    """Each start position on a channel holding m1..m5 (m4, m5 published 2 s after m3)."""
    conn = await connect("py-starts")
    for i in (1, 2, 3):
        await conn.publish("sp", f"m{i}")
    await asyncio.sleep(2.0)
    for i in (4, 5):
        await conn.publish("sp", f"m{i}")
    out: dict[str, Any] = {}
    # The client sends startTimeDelta = int(now - time) * 1e9: whole seconds only (it
    # truncates). `time` is taken right before subscribing, first of all: now - time = 1.5 s
    # gives a 1 s delta, so m4/m5 (just published) are newer and m1..m3 (2 s old) older.
    variants: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("time_delta_1s", lambda: {"start_at": "time", "time": time.time() - 1.5}),
        ("time_delta_60s", lambda: {"start_at": "time", "time": time.time() - 60}),
        ("all", lambda: {"deliver_all_available": True}),
        ("first", lambda: {"start_at": "first"}),
        ("last", lambda: {"start_at": "last_received"}),
        ("seq3", lambda: {"start_at": "sequence", "sequence": 3}),
        ("seq_past_end", lambda: {"start_at": "sequence", "sequence": 99}),
        ("new_only", lambda: {}),
    ]
    for key, options in variants:
        sub, got = await subscribe(conn, "sp", **options())
        await asyncio.sleep(SETTLE)
        out[key] = [[m["seq"], m["data"]] for m in got.received]
        await sub.unsubscribe()
    # new-only and last-received subscribers then get exactly what follows.
    _, fresh = await subscribe(conn, "sp")
    _, last = await subscribe(conn, "sp", start_at="last_received")
    await last.wait(1)
    await conn.publish("sp", "m6")
    await fresh.wait(1)
    await last.wait(2)
    await asyncio.sleep(SETTLE)
    out["new_only_then_publish"] = fresh.seqs()
    out["last_then_publish"] = last.seqs()
    await conn.close()
    return out


async def durable_reconnect() -> dict[str, Any]:
    """Durable, manual acks, max_inflight=2: ack only seq 1, close the connection without
    unsubscribing, publish while offline, reconnect and resume the durable."""
    conn = await connect("py-durable")
    for i in range(1, 6):
        await conn.publish("dr", f"d{i}")
    options = {"durable_name": "dur", "manual_acks": True, "max_inflight": 2}
    _, first = await subscribe(conn, "dr", deliver_all_available=True, **options)
    await first.wait(2)
    await asyncio.sleep(SETTLE)
    stalled = first.flags()  # max_inflight reached: nothing more until an ack
    await conn.sc.ack(first.msgs[0])
    await first.wait(3)
    await asyncio.sleep(SETTLE)
    after_ack = first.flags()
    await conn.close()  # the durable goes offline with 2 and 3 unacknowledged

    other = await connect("py-durable-pub")
    await other.publish("dr", "d6")
    await other.close()

    conn = await connect("py-durable")
    # deliver_all_available is ignored on resume: the stored position wins.
    _, resumed = await subscribe(
        conn, "dr", ack_if=lambda m: True, deliver_all_available=True, **options
    )
    await resumed.wait(5)
    await asyncio.sleep(SETTLE)
    await conn.close()
    return {
        "stalled": stalled,
        "after_ack": after_ack,
        "resumed": [[m["seq"], m["data"], m["redelivered"]] for m in resumed.received],
        "resumed_counts": [m["count"] for m in resumed.received],
    }


async def ack_wait() -> dict[str, Any]:
    """ack_wait=1 s, no ack on the first delivery: redelivered; acked the second time."""
    conn = await connect("py-ackwait")
    seen = 0

    def ack_second(msg: Msg) -> bool:
        nonlocal seen
        seen += 1
        return seen >= 2

    _, got = await subscribe(conn, "aw", ack_if=ack_second, manual_acks=True, ack_wait=1)
    sent = time.monotonic()
    await conn.publish("aw", "once")
    await got.wait(2)
    gap = time.monotonic() - sent
    await asyncio.sleep(1.5)  # acked: no third delivery after another ack wait
    await conn.close()
    keys = ("seq", "data", "redelivered", "count")
    return {
        "deliveries": [{k: m[k] for k in keys} for m in got.received],
        "gap": gap,
    }


async def queue() -> dict[str, Any]:
    """Two members share the work; a leaving member's unacked messages move to another."""
    a = await connect("py-qa")
    b = await connect("py-qb")
    sub_a, got_a = await subscribe(a, "q", queue="workers")
    _, got_b = await subscribe(b, "q", queue="workers")
    for i in range(20):
        await a.publish("q", f"w{i}")
    await wait_until(lambda: len(got_a.received) + len(got_b.received) >= 20)
    await asyncio.sleep(SETTLE)
    shared = {"a": got_a.seqs(), "b": got_b.seqs()}
    # Member C holds its messages unacknowledged, then its connection closes: B gets them.
    await sub_a.unsubscribe()
    c = await connect("py-qc")
    _, got_c = await subscribe(c, "q", queue="workers", manual_acks=True)
    b_before = len(got_b.received)
    for i in range(6):
        await a.publish("q", f"v{i}")
    await wait_until(lambda: len(got_b.received) + len(got_c.received) >= b_before + 6)
    await asyncio.sleep(SETTLE)
    held = got_c.seqs()
    await c.close()
    await wait_until(lambda: len(got_b.received) >= b_before + 6)
    await asyncio.sleep(SETTLE)
    later = got_b.received[b_before:]
    await a.close()
    await b.close()
    return {
        "shared": shared,
        "held": held,
        "moved": [m["seq"] for m in later if m["redelivered"]],
        "b_new": [m["seq"] for m in later if not m["redelivered"]],
    }


async def errors() -> dict[str, Any]:
    """Errors the server reports, as this client surfaces them."""
    conn = await connect("py-errs")
    out: dict[str, Any] = {}
    out["duplicate_client"] = await error_of(connect("py-errs"))
    out["invalid_client_id"] = await error_of(connect("bad id!"))
    out["invalid_subject"] = await error_of(conn.sc.subscribe("foo..bar", cb=Collector(conn)))
    out["wildcard_subject"] = await error_of(conn.sc.subscribe("foo.*", cb=Collector(conn)))
    out["max_inflight_0"] = await error_of(
        conn.sc.subscribe("x", cb=Collector(conn), max_inflight=0)
    )
    out["ack_wait_0"] = await error_of(conn.sc.subscribe("x", cb=Collector(conn), ack_wait=0))
    await conn.sc.subscribe("x", cb=Collector(conn), durable_name="dup")
    out["duplicate_durable"] = await error_of(
        conn.sc.subscribe("x", cb=Collector(conn), durable_name="dup")
    )
    out["durable_queue_name"] = await error_of(
        conn.sc.subscribe("x", cb=Collector(conn), durable_name="a:b", queue="g")
    )
    # Publishes to channel names the server refuses get PubAck.error. The client publishes
    # on "<pubPrefix>.<channel>", so a channel with an empty token ("foo..bar", "foo.")
    # makes a NATS subject nats-server does not route at all: no PubAck ever comes back
    # (the same with every STAN client; the server never sees the message).
    out["publish"] = {
        channel: await publish_outcome(conn, channel, 5.0) for channel in ("foo/bar", "a*b", "a>b")
    }
    for channel in ("foo..bar", "foo."):
        out["publish"][channel] = await publish_outcome(conn, channel, 1.0)
    await conn.publish("casing", "x")
    out["publish"]["Casing"] = await publish_outcome(conn, "Casing", 5.0)
    out["valid_after_errors"] = (await conn.publish("ok", "x")).error
    await conn.close()
    return out


async def durable_unsubscribe_vs_close() -> dict[str, Any]:
    """Closing a durable keeps its position; unsubscribing forgets it."""
    conn = await connect("py-dvc")
    options = {"durable_name": "dd", "deliver_all_available": True}
    sub, first = await subscribe(conn, "dvc", **options)
    await conn.publish("dvc", "a")
    await first.wait(1)
    await sub.close()
    await conn.publish("dvc", "b")
    sub, resumed = await subscribe(conn, "dvc", **options)
    await resumed.wait(1)
    await asyncio.sleep(SETTLE)
    await sub.unsubscribe()
    await conn.publish("dvc", "c")
    sub, fresh = await subscribe(conn, "dvc", **options)
    await fresh.wait(3)
    await asyncio.sleep(SETTLE)
    # An offline durable cannot be unsubscribed without resuming it: its ack inbox is
    # gone from the server.
    await sub.close()
    stale_unsub = await error_of(sub.unsubscribe())
    # A plain subscription's close deletes it: a second close finds nothing.
    plain, _ = await subscribe(conn, "dvc")
    await plain.close()
    plain_second_close = await error_of(plain.close())
    await conn.close()
    return {
        "first": [m["data"] for m in first.received],
        "after_close": [[m["data"], m["redelivered"]] for m in resumed.received],
        "after_unsubscribe": [m["data"] for m in fresh.received],
        "offline_unsubscribe": stale_unsub,
        "plain_second_close": plain_second_close,
    }


async def pings() -> dict[str, Any]:
    """Client PINGs (protocol 1) every second keep a healthy connection alive."""
    conn = await connect("py-pinger", ping_interval=1, ping_max_out=2)
    ping_requests = conn.sc._ping_requests
    await asyncio.sleep(3.5)
    ack = await conn.publish("p", "still here")
    lost = list(conn.lost)
    await conn.close()
    return {"lost": lost, "ping_requests": ping_requests, "publish_error": ack.error}


async def replaced_by_ping() -> dict[str, Any]:
    """A client replaced by a new connection with its ID learns it from its PINGs."""
    old = await connect("py-replaced", ping_interval=1, ping_max_out=100)
    # Stop answering heartbeats: the duplicate check finds the old connection dead.
    await old.nc.unsubscribe(old.sc._hb_inbox_sid)
    fresh = await connect("py-replaced")
    await wait_until(lambda: bool(old.lost))
    await fresh.close()
    await old.nc.close()
    return {"lost": old.lost}


async def restart_before() -> dict[str, Any]:
    """Before a server restart: durable with 1..3 acked, 4..5 pending; a second client
    ('py-ghost') goes away without closing its session."""
    conn = await connect("py-restart")
    for i in range(1, 6):
        await conn.publish("rs", f"r{i}")
    _, got = await subscribe(
        conn,
        "rs",
        ack_if=lambda m: m.sequence <= 3,
        durable_name="keep",
        manual_acks=True,
        deliver_all_available=True,
    )
    await got.wait(5)
    await asyncio.sleep(SETTLE)
    await conn.close()
    ghost = await connect("py-ghost")
    await ghost.publish("rs-ghost", "g")
    await ghost.drop()
    return {"received": got.flags()}


async def restart_after() -> dict[str, Any]:
    """After the restart: the durable resumes (4, 5 redelivered, then new 6), all messages
    are still stored, the gone client's ID can be reused."""
    conn = await connect("py-restart")
    _, resumed = await subscribe(
        conn, "rs", ack_if=lambda m: True, durable_name="keep", manual_acks=True
    )
    await resumed.wait(2)
    ack = await conn.publish("rs", "r6")
    await resumed.wait(3)
    await asyncio.sleep(SETTLE)
    _, replay = await subscribe(conn, "rs", deliver_all_available=True)
    await replay.wait(6)
    await asyncio.sleep(SETTLE)
    ghost = await connect("py-ghost")
    _, ghost_replay = await subscribe(ghost, "rs-ghost", deliver_all_available=True)
    await ghost_replay.wait(1)
    await ghost.close()
    await conn.close()
    return {
        "resumed": [[m["seq"], m["data"], m["redelivered"]] for m in resumed.received],
        "new_seq_ack": ack.error,
        "replay": [[m["seq"], m["data"]] for m in replay.received],
        "ghost": [m["data"] for m in ghost_replay.received],
    }


SCENARIOS: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
    "pubsub": pubsub,
    "start_positions": start_positions,
    "durable_reconnect": durable_reconnect,
    "ack_wait": ack_wait,
    "queue": queue,
    "errors": errors,
    "durable_unsubscribe_vs_close": durable_unsubscribe_vs_close,
    "pings": pings,
    "replaced_by_ping": replaced_by_ping,
    "restart_before": restart_before,
    "restart_after": restart_after,
}


def main(argv: list[str]) -> int:
    global URL, CLUSTER
    if len(argv) != 4 or argv[1] not in SCENARIOS:
        report: dict[str, Any] = {
            "ok": False,
            "error": f"usage: {argv[0]} <{'|'.join(SCENARIOS)}> <nats_url> <cluster_id>",
        }
    else:
        URL, CLUSTER = argv[2], argv[3]
        try:
            result = asyncio.run(asyncio.wait_for(SCENARIOS[argv[1]](), 40))
            report = {"ok": True, "result": result}
        except BaseException as exc:  # report everything as the last line
            traceback.print_exc()
            report = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
