"""Client-protocol fuzzing of a real stanpkg server (memory store) on a real nats-server.

Each round sends one hostile payload to every client-facing subject (discover, publish,
subscribe, unsubscribe, subscription close, close, a live subscription's ack inbox,
pings) and answers the server's heartbeats with one. Payloads are random bytes, empty,
near NATS's max payload, valid protobufs of another message type, and mutations (bit
flips, cuts, inserted bytes, stray fields, invalid UTF-8) of valid requests built with
stanpkg/proto/protocol_pb2. Every answer is checked against the reference's rules
(../shared/spec/protocol.md §3-§12): a request that does not decode gets the reference's
error text, an undecodable ping or any ack gets no answer at all.

Before and after (every client the fuzz registered closed again through the protocol)
the harness counts clients and subscriptions (monitoring endpoints), resident memory and
open files (/metrics), asyncio tasks and pending timers (in the server's loop): nothing
may be left behind. At the end a new real client must connect, publish, receive and ack.

    .venv/bin/python tests/fuzz/protocol_fuzz.py --rounds 20000 --seed 1
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import io
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import nats
from google.protobuf.message import DecodeError, Message
from nats.aio.msg import Msg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stanpkg.monitor.service import MonitorConfig, MonitorServer
from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.plan.subjects import is_valid_channel_name
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors
from stanpkg.server.clients import is_valid_client_id
from stanpkg.server.identity import STAN_VERSION
from stanpkg.server.log import Logger
from stanpkg.server.modes import mode_for
from stanpkg.server.monitoring_views import ServerView
from stanpkg.server.non_utf8_requests import twin_message
from stanpkg.server.server import StreamingServer
from stanpkg.server.wire import is_ctrl_msg
from stanpkg.stores.base import TOO_MANY_CHANNELS
from stanpkg.stores.memory import MemoryStore
from stanpkg.transport import find_nats_server_binary
from stanpkg.transport.endpoint import NatsEndpoint

KINDS = ("discover", "publish", "subscribe", "unsubscribe", "subclose", "close", "ack", "ping")
NO_REPLY = "<no reply>"
_REPLY_WAIT = 5.0  # seconds for the last answers of a batch (a duplicate probe takes 0.5 s)
_HUGE_EVERY = 50  # one payload near max_payload every so many sends


@dataclass
class Snapshot:
    clients: int
    subscriptions: int
    rss: float
    open_fds: float
    tasks: int
    timers: int
    task_names: list[str] = field(default_factory=list)


@dataclass
class Report:
    rounds: int
    seed: int
    sent: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    before: Snapshot | None = None
    after: Snapshot | None = None
    tracebacks: int = 0
    seconds: float = 0.0

    def lines(self) -> Iterator[str]:
        yield f"rounds {self.rounds}, seed {self.seed}, {sum(self.sent.values())} payloads"
        yield f"  in {self.seconds:.1f} s"
        for kind in KINDS:
            yield f"  {kind:<12} {self.sent[kind]:>7} sent"
        for answer, count in self.answers.most_common():
            yield f"  answer {answer!r}: {count}"
        if self.before and self.after:
            for name in ("clients", "subscriptions", "tasks", "timers", "open_fds"):
                yield f"  {name}: {getattr(self.before, name)} -> {getattr(self.after, name)}"
            growth = (self.after.rss - self.before.rss) / 2**20
            yield f"  rss: {self.before.rss / 2**20:.1f} MiB -> {self.after.rss / 2**20:.1f} MiB"
            yield f"  rss growth: {growth:+.1f} MiB"
        yield f"  tracebacks in the server log: {self.tracebacks}"
        yield f"  failures: {len(self.failures)}"
        for failure in self.failures[:20]:
            yield f"    {failure}"


# -- payloads ---------------------------------------------------------------------------


def _text(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.5:
        return f"fz-{rng.randrange(10_000)}"
    if pick < 0.6:
        return ""
    if pick < 0.7:
        return "a.b..c" if rng.random() < 0.5 else "foo.*"
    return "".join(
        chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x80, 0x3000))))
        for _ in range(rng.randrange(1, 12))
    )


def _number(rng: random.Random) -> int:
    return rng.choice((0, 1, -1, 2**31 - 1, -(2**31), rng.randrange(-5, 100)))


def valid_request(kind: str, rng: random.Random, live: dict[str, str]) -> Message:
    """A well-formed request of the subject's type with hostile field values."""
    cid = live["client"] if rng.random() < 0.3 else _text(rng)
    if kind == "discover":
        inbox = rng.choice((f"_INBOX.fz{rng.randrange(10**6)}", "", "bad inbox", "x" * 300))
        return pb.ConnectRequest(
            clientID=cid if cid != live["client"] else _text(rng),
            heartbeatInbox=inbox,
            protocol=_number(rng),
            connID=rng.randbytes(rng.randrange(0, 30)),
            pingInterval=_number(rng),
            pingMaxOut=_number(rng),
        )
    if kind == "publish":
        return pb.PubMsg(
            clientID=cid,
            guid=_text(rng),
            subject=_text(rng),
            reply=_text(rng),
            data=rng.randbytes(rng.randrange(0, 100)),
            connID=live["conn_id"].encode() if rng.random() < 0.3 else rng.randbytes(4),
        )
    if kind == "subscribe":
        # Subscriptions of a registered client, but not of the live one: its
        # subscriptions are counted before and after.
        owner = live["owner"] if cid == live["client"] else cid
        return pb.SubscriptionRequest(
            clientID=owner,
            subject=_text(rng),
            qGroup=_text(rng) if rng.random() < 0.3 else "",
            inbox=rng.choice((f"_INBOX.fz{rng.randrange(10**6)}", "", "bad inbox")),
            maxInFlight=_number(rng),
            ackWaitInSecs=_number(rng),
            durableName=_text(rng) if rng.random() < 0.3 else "",
            startPosition=rng.randrange(-2, 7),  # type: ignore[arg-type]
            startSequence=rng.randrange(0, 2**64),
            startTimeDelta=rng.randrange(-(2**63), 2**63),
        )
    if kind in ("unsubscribe", "subclose"):
        # The live subscription with another client ID: "unknown clientID" (with its own
        # it would legally end, and the run with it).
        return pb.UnsubscribeRequest(
            clientID=cid if cid != live["client"] else _text(rng),
            subject=rng.choice((live["channel"], _text(rng))),
            inbox=rng.choice((live["ack_inbox"], _text(rng))),
        )
    if kind == "close":
        # Never the live client: closing it is legal and would end the run.
        return pb.CloseRequest(clientID=_text(rng))
    if kind == "ack":
        return pb.Ack(
            subject=rng.choice((live["channel"], _text(rng))), sequence=rng.randrange(0, 20)
        )
    return pb.Ping(connID=rng.choice((live["conn_id"].encode(), rng.randbytes(8), b"")))


_WRONG_TYPES: tuple[Callable[[random.Random], Message], ...] = (
    lambda rng: pb.MsgProto(sequence=rng.randrange(2**64), data=rng.randbytes(20), timestamp=-1),
    lambda rng: pb.PubAck(guid="g", error="stan: x"),
    lambda rng: pb.SubscriptionResponse(ackInbox="_INBOX.x", error="e"),
    lambda rng: pb.ConnectResponse(pubPrefix="p", protocol=7, publicKey="k"),
    lambda rng: pb.CloseResponse(error="stan: unknown clientID"),
)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four byte-level mutations of an encoded message."""
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(7)
        pos = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            del buf[pos:]  # cut
        elif op == 2:
            buf[pos:pos] = rng.randbytes(rng.randrange(1, 8))
        elif op == 3:  # a stray field: random tag, any wire type
            buf += bytes((rng.randrange(1, 256),)) + rng.randbytes(rng.randrange(0, 6))
        elif op == 4:  # a length prefix that lies
            buf[pos:pos] = bytes((0x12, rng.randrange(0x80, 0x100), 0xFF, 0x0F))
        elif op == 5:  # invalid UTF-8 in a string field
            buf += b"\x0a\x02\xc3\x28"
        elif op == 6 and buf:
            buf += buf[: rng.randrange(len(buf))]  # repeated fields: the last one wins
    return bytes(buf)


def payload_for(
    kind: str, rng: random.Random, live: dict[str, str], max_payload: int, n: int
) -> bytes:
    if n % _HUGE_EVERY == 0:
        return rng.randbytes(max_payload - rng.randrange(0, 64))
    pick = rng.random()
    if pick < 0.15:
        return rng.randbytes(rng.randrange(1, 200))
    if pick < 0.2:
        return b""
    if pick < 0.3:
        return rng.choice(_WRONG_TYPES)(rng).SerializeToString()
    valid = valid_request(kind, rng, live).SerializeToString()
    return valid if pick < 0.55 else mutate(valid, rng)


# -- the reference's answers ------------------------------------------------------------


def _decode(cls: type[Message], payload: bytes) -> Any:
    try:
        return cls.FromString(payload)
    except DecodeError:
        return None


def _as_reference(name: str, payload: bytes) -> Any:
    """The request as the reference decodes it: strings are bytes, UTF-8 or not."""
    return _decode(twin_message(name), payload)


def _as_str(raw: bytes) -> str:
    return raw.decode(errors="surrogateescape")  # not UTF-8: matches no valid ID or name


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def expected(kind: str, payload: bytes) -> set[str] | None:
    """The answers the reference may give (error texts, "" for success, NO_REPLY), or
    None when the outcome depends on state the harness does not track."""
    if kind == "discover":
        req = _as_reference("ConnectRequest", payload)
        if req is None or not req.heartbeatInbox:
            return {errors.INVALID_CONN_REQ}
        if not is_valid_client_id(_as_str(req.clientID)):
            return {errors.INVALID_CLIENT_ID}
        if not _utf8(req.heartbeatInbox):  # the reference registers it; stanpkg refuses
            return {errors.INVALID_CONN_REQ}
        return {"", errors.CLIENT_ALREADY_REGISTERED}
    if kind == "publish":
        pm = _as_reference("PubMsg", payload)
        if pm is None:
            return {NO_REPLY} if is_ctrl_msg(payload) else {errors.INVALID_PUB_REQ}
        if not pm.guid or not is_valid_channel_name(_as_str(pm.subject), allow_wildcards=False):
            return {errors.INVALID_PUB_REQ}
        return None  # depends on whether the publisher is registered
    if kind == "subscribe":
        req = _as_reference("SubscriptionRequest", payload)
        if req is None:
            return {errors.INVALID_SUB_REQ}
        if not req.clientID:
            return {errors.CLIENT_ID_MISSING}
        if req.ackWaitInSecs <= 0:
            return {errors.INVALID_ACK_WAIT}
        if req.maxInFlight <= 0:
            return {errors.INVALID_MAX_INFLIGHT}
        if not 0 <= req.startPosition <= 4:
            return {errors.INVALID_START}
        if not is_valid_channel_name(_as_str(req.subject), allow_wildcards=False):
            return {errors.INVALID_SUBJECT}
        if not _utf8(req.clientID):
            return {errors.UNKNOWN_CLIENT}
        return None
    if kind in ("unsubscribe", "subclose"):
        if _as_reference("UnsubscribeRequest", payload) is None:
            return {errors.INVALID_UNSUB_REQ}
        return {errors.UNKNOWN_CHANNEL, errors.INVALID_SUB, errors.UNKNOWN_CLIENT, ""}
    if kind == "close":
        req = _as_reference("CloseRequest", payload)
        if req is None:
            return {errors.INVALID_CLOSE_REQ}
        return {errors.UNKNOWN_CLIENT} if not _utf8(req.clientID) else {errors.UNKNOWN_CLIENT, ""}
    if kind == "ack":
        return {NO_REPLY}
    ping = _decode(pb.Ping, payload)
    if not payload or ping is None:
        return {NO_REPLY}
    return {"", errors.CLIENT_GONE}


_RESPONSE_TYPES = {
    "discover": "ConnectResponse",
    "publish": "PubAck",
    "subscribe": "SubscriptionResponse",
    "unsubscribe": "SubscriptionResponse",
    "subclose": "SubscriptionResponse",
    "close": "CloseResponse",
    "ping": "PingResponse",
}


def answer_text(kind: str, data: bytes) -> str:
    # As the reference's clients read it: a PubAck echoes a guid that may not be UTF-8.
    resp = _as_reference(_RESPONSE_TYPES.get(kind, "PingResponse"), data)
    if resp is None:
        return f"<undecodable {kind} answer>"
    return str(resp.error.decode(errors="replace"))


def discover_subject(cluster_id: str) -> str:
    return f"_STAN.discover.{cluster_id}"


class _LogTail(io.StringIO):
    """The server log as the run needs it: its tracebacks counted, its last lines
    kept (the whole log would grow the harness's own memory by tens of MiB)."""

    def __init__(self) -> None:
        super().__init__()
        self.tracebacks = 0
        self.internal_errors = 0  # a handler's exception caught by the loop around it
        self._tail: collections.deque[str] = collections.deque(maxlen=200)

    def write(self, text: str) -> int:
        self.tracebacks += text.count("Traceback")
        self.internal_errors += text.count("Error processing publish batch")
        self._tail.append(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._tail)


def _server_tasks() -> list[asyncio.Task[Any]]:
    """The loop's tasks but aiohttp's handlers of the harness's own monitoring requests."""
    return [
        task
        for task in asyncio.all_tasks()
        if not getattr(task.get_coro(), "__qualname__", "").startswith("RequestHandler.")
    ]


# -- measuring --------------------------------------------------------------------------


def _pending_timers(loop: asyncio.AbstractEventLoop) -> int:
    scheduled = getattr(loop, "_scheduled", None)  # asyncio's own loop; uvloop hides it
    if scheduled is None:
        return -1
    return sum(1 for handle in scheduled if not handle.cancelled())


async def _no_heartbeat_in_flight(limit: float = 2.0) -> None:
    """Wait until no heartbeat probe runs: a live client has either a probe task or a
    timer for the next one, so counting tasks and timers mid-probe would move one from
    one count to the other and read as a leak."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not any(task.get_name().startswith("stan-hb-") for task in asyncio.all_tasks()):
            return
        await asyncio.sleep(0.005)


async def snapshot(http: aiohttp.ClientSession, base: str) -> Snapshot:
    async with http.get(f"{base}/streaming/serverz") as resp:
        serverz = json.loads(await resp.text())
    async with http.get(f"{base}/streaming/channelsz?subs=1&limit=100000") as resp:
        channelsz = json.loads(await resp.text())
    online = sum(
        1
        for channel in channelsz.get("channels") or []
        for sub in channel.get("subscriptions") or []
        if not sub.get("is_offline")
    )
    async with http.get(f"{base}/metrics") as resp:
        metrics = await resp.text()
    values: dict[str, float] = {}
    for line in metrics.splitlines():
        name, _, value = line.partition(" ")
        if name in ("process_resident_memory_bytes", "process_open_fds"):
            values[name] = float(value)
    await _no_heartbeat_in_flight()
    return Snapshot(
        clients=int(serverz["clients"]),
        subscriptions=online,
        rss=values.get("process_resident_memory_bytes", -1.0),
        open_fds=values.get("process_open_fds", -1.0),
        tasks=len(_server_tasks()),
        task_names=sorted(repr(task.get_coro()) for task in _server_tasks()),
        timers=_pending_timers(asyncio.get_running_loop()),
    )


# -- the run ----------------------------------------------------------------------------


def fuzz_plan(cluster_id: str) -> Plan:
    # Heartbeats every 200 ms so heartbeat answers are fuzzed often; clients the fuzz
    # registered with inboxes nobody answers are dropped after three misses.
    argv = ["-cid", cluster_id, "-hbi", "200ms", "-hbt", "200ms", "-hbf", "2"]
    compiled = compile_args(argv, env={})
    assert compiled.plan is not None, compiled.diagnostics
    return compiled.plan


class _Live:
    """The real client that must keep working: connected, subscribed, answering
    heartbeats with hostile payloads."""

    def __init__(self, nc: nats.NATS, cluster_id: str, rng: random.Random) -> None:
        self.nc = nc
        self.cluster_id = cluster_id
        self.rng = rng
        self.fields: dict[str, str] = {}
        self.heartbeats = 0
        self.deliveries: asyncio.Queue[pb.MsgProto] = asyncio.Queue()

    async def _on_heartbeat(self, msg: Msg) -> None:
        self.heartbeats += 1
        pick = self.rng.random()
        data = b"" if pick < 0.3 else self.rng.randbytes(self.rng.randrange(1, 4096))
        await msg.respond(data)

    async def _on_msg(self, msg: Msg) -> None:
        self.deliveries.put_nowait(pb.MsgProto.FromString(msg.data))

    async def start(self, client_id: str, channel: str) -> pb.ConnectResponse:
        hb_inbox = self.nc.new_inbox()
        await self.nc.subscribe(hb_inbox, cb=self._on_heartbeat)
        conn_id = f"conn-{client_id}"
        req = pb.ConnectRequest(
            clientID=client_id,
            heartbeatInbox=hb_inbox,
            protocol=1,
            connID=conn_id.encode(),
            pingInterval=5,
            pingMaxOut=88,
        )
        msg = await self.nc.request(
            discover_subject(self.cluster_id), req.SerializeToString(), timeout=5
        )
        resp = pb.ConnectResponse.FromString(msg.data)
        if resp.error:
            raise RuntimeError(f"connect: {resp.error}")
        inbox = self.nc.new_inbox()
        await self.nc.subscribe(inbox, cb=self._on_msg)
        sub = pb.SubscriptionRequest(
            clientID=client_id,
            subject=channel,
            inbox=inbox,
            maxInFlight=100,
            ackWaitInSecs=30,
            startPosition=pb.First,
        )
        msg = await self.nc.request(resp.subRequests, sub.SerializeToString(), timeout=5)
        sub_resp = pb.SubscriptionResponse.FromString(msg.data)
        if sub_resp.error:
            raise RuntimeError(f"subscribe: {sub_resp.error}")
        owner = pb.ConnectRequest(clientID="fuzz-owner", heartbeatInbox=hb_inbox)
        await self.nc.request(
            discover_subject(self.cluster_id), owner.SerializeToString(), timeout=5
        )
        self.fields = {
            "owner": "fuzz-owner",
            "client": client_id,
            "conn_id": conn_id,
            "channel": channel,
            "ack_inbox": sub_resp.ackInbox,
        }
        return resp

    async def round_trip(self, resp: pb.ConnectResponse, data: bytes) -> None:
        """Publish, receive and ack one message as a real client does."""
        pm = pb.PubMsg(
            clientID=self.fields["client"],
            guid=f"g{time.monotonic_ns()}",
            subject=self.fields["channel"],
            data=data,
            connID=self.fields["conn_id"].encode(),
        )
        msg = await self.nc.request(
            f"{resp.pubPrefix}.{self.fields['channel']}", pm.SerializeToString(), timeout=5
        )
        ack = pb.PubAck.FromString(msg.data)
        if ack.error:
            raise RuntimeError(f"publish: {ack.error}")
        while True:
            got = await asyncio.wait_for(self.deliveries.get(), 5)
            ack_msg = pb.Ack(subject=got.subject, sequence=got.sequence).SerializeToString()
            await self.nc.publish(self.fields["ack_inbox"], ack_msg)
            if got.data == data:
                return


async def _close_fuzz_clients(
    nc: nats.NATS, close_subject: str, http: aiohttp.ClientSession, base: str, keep: str
) -> None:
    async with http.get(f"{base}/streaming/clientsz?limit=100000") as resp:
        clientsz = json.loads(await resp.text())
    for client in clientsz.get("clients") or []:
        if client["id"] != keep:
            req = pb.CloseRequest(clientID=client["id"]).SerializeToString()
            with contextlib.suppress(nats.errors.TimeoutError):
                await nc.request(close_subject, req, timeout=5)


async def fuzz(nats_url: str, rounds: int, seed: int, cluster_id: str = "fuzz") -> Report:
    report = Report(rounds=rounds, seed=seed)
    rng = random.Random(seed)
    plan = fuzz_plan(cluster_id)
    log_text = _LogTail()
    log = Logger(stream=log_text, debug=False, trace=False)
    server = StreamingServer(plan, MemoryStore(plan.store_limits, log), log, mode=mode_for(plan))
    await server.start(NatsEndpoint(nats_url))
    monitor = MonitorServer(
        ServerView(server),
        MonitorConfig("127.0.0.1", 0),
        version=STAN_VERSION,
        go_version="go",
        log=log,
    )
    await monitor.start()
    base = f"http://127.0.0.1:{monitor.port}"
    nc = await nats.connect(nats_url, name="fuzz", max_reconnect_attempts=0)
    live = _Live(nc, cluster_id, rng)
    http = aiohttp.ClientSession()
    started = time.monotonic()
    try:
        resp = await live.start("fuzz-live", "fuzz-live-ch")
        subjects = {
            "discover": discover_subject(cluster_id),
            "publish": f"{resp.pubPrefix}.fuzz",
            "subscribe": resp.subRequests,
            "unsubscribe": resp.unsubRequests,
            "subclose": resp.subCloseRequests,
            "close": resp.closeRequests,
            "ack": live.fields["ack_inbox"],
            "ping": resp.pingRequests,
        }
        answers: dict[str, list[bytes]] = {}

        async def on_answer(msg: Msg) -> None:
            answers.setdefault(msg.subject, []).append(msg.data)

        prefix = nc.new_inbox()
        await nc.subscribe(f"{prefix}.*", cb=on_answer)
        await live.round_trip(resp, b"warm-up")
        await asyncio.sleep(0.5)
        report.before = await snapshot(http, base)
        sent = 0
        batch: list[tuple[str, str, bytes]] = []
        late: dict[str, str] = {}
        for round_no in range(rounds):
            for kind in KINDS:
                sent += 1
                payload = payload_for(kind, rng, live.fields, nc.max_payload, sent)
                reply = f"{prefix}.{sent}"
                await nc.publish(subjects[kind], payload, reply=reply)
                batch.append((kind, reply, payload))
                report.sent[kind] += 1
            if len(batch) >= 400 or round_no == rounds - 1:
                await _check_batch(batch, answers, report, nc, late)
                batch.clear()
                await live.round_trip(resp, f"between batches {round_no}".encode())
        await _close_fuzz_clients(nc, resp.closeRequests, http, base, keep="fuzz-live")
        await asyncio.sleep(1.0)  # heartbeat and duplicate-probe tasks end
        await live.round_trip(resp, b"after the fuzz")
        for reply, failure in late.items():
            if reply in answers:
                report.answers["late answer (after the batch's wait)"] += 1
            else:
                report.failures.append(failure)
        report.after = await snapshot(http, base)
        _compare(report)
        await _fresh_client(nats_url, cluster_id)
    except Exception as exc:  # reported, not raised: the report says what broke
        report.failures.append(f"run stopped: {exc!r}")
    finally:
        report.seconds = time.monotonic() - started
        await http.close()
        await nc.close()
        await monitor.stop()
        await server.stop()
    report.tracebacks = log_text.tracebacks
    if log_text.internal_errors:
        report.failures.append(f"{log_text.internal_errors} publish batches failed")
    if report.tracebacks:
        report.failures.append("Traceback in the server log:\n" + log_text.getvalue()[-3000:])
    return report


async def _check_batch(
    batch: list[tuple[str, str, bytes]],
    answers: dict[str, list[bytes]],
    report: Report,
    nc: nats.NATS,
    late: dict[str, str],
) -> None:
    """Wait for every answer a batch must get, then check each against the reference;
    an answer still missing goes to ``late`` (a busy machine may hold it up)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _REPLY_WAIT
    must_answer = [(k, r, p) for k, r, p in batch if NO_REPLY not in (expected(k, p) or set())]
    await nc.flush()
    while loop.time() < deadline and any(r not in answers for _, r, _ in must_answer):
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)  # answers that must not come have had their chance
    for kind, reply, payload in batch:
        got = answers.pop(reply, [])
        texts = [answer_text(kind, data) for data in got] or [NO_REPLY]
        if len(texts) > 1:
            report.failures.append(f"{kind}: {len(texts)} answers to one request {payload[:40]!r}")
        text = texts[0]
        report.answers[f"{kind}: {text}"] += 1
        allowed = expected(kind, payload)
        if kind == "publish" and allowed is None:
            # v0.25's case rule: the channel "N" after "n" (names from the run itself).
            conflict = text if text.startswith('rejecting channel "') else ""
            allowed = {"", errors.INVALID_PUB_REQ, TOO_MANY_CHANNELS, conflict}
        if kind == "subscribe" and allowed is None:
            allowed = {text} if text != NO_REPLY else {"<an answer>"}  # state-dependent
        if text == NO_REPLY and allowed is not None and NO_REPLY not in allowed:
            late[reply] = f"{kind}: no answer by the end of the run for {payload.hex()}"
        elif allowed is not None and text not in allowed:
            report.failures.append(
                f"{kind}: answered {text!r}, reference {sorted(allowed)!r} for {payload.hex()}"
            )


def _compare(report: Report) -> None:
    before, after = report.before, report.after
    assert before is not None and after is not None
    for name in ("clients", "subscriptions", "tasks", "timers", "open_fds"):
        if getattr(after, name) > getattr(before, name):
            report.failures.append(
                f"leak: {name} {getattr(before, name)} -> {getattr(after, name)}"
            )
    new_tasks = Counter(after.task_names) - Counter(before.task_names)
    if new_tasks:
        report.failures.append(f"tasks left: {sorted(new_tasks)}")


async def _fresh_client(nats_url: str, cluster_id: str) -> None:
    nc = await nats.connect(nats_url, name="fuzz-next")
    try:
        client = _Live(nc, cluster_id, random.Random(0))
        resp = await client.start("fuzz-next", "fuzz-live-ch")  # max_channels may be reached
        await client.round_trip(resp, b"next client")
        req = pb.CloseRequest(clientID="fuzz-next").SerializeToString()
        closed = pb.CloseResponse.FromString(
            (await nc.request(resp.closeRequests, req, timeout=5)).data
        )
        if closed.error:
            raise RuntimeError(f"close: {closed.error}")
    finally:
        await nc.close()


# -- command line -----------------------------------------------------------------------


@contextlib.contextmanager
def nats_server(log_path: str = os.devnull) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [find_nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(suffix=".log") as nats_log:
        with nats_server(nats_log.name) as url:
            report = asyncio.run(fuzz(url, args.rounds, args.seed))
        print("\n".join(report.lines()))
        # An answer NATS itself dropped (a slow consumer) is no fault of the server's.
        slow = Path(nats_log.name).read_text(errors="replace").count("Slow Consumer")
        print(f"  nats-server slow-consumer events: {slow}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
