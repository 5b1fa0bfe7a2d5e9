"""JetStream's own floor under the clustered store: what a program reaches that writes the
batches a serving node writes and does nothing else.

Three nats-servers (the binary the cluster embeds, the configuration it renders) form a
JetStream cluster on this host; one shared stream is made with the clustered store's
configuration and its leader moved to the server the writer is on, as a serving node
does. The writer sends ``-n`` messages of ``--size`` bytes to one channel's subject as
atomic batches of ``--batch`` messages, built by the store's own code (same headers, same
fence), with ``--inflight`` batches outstanding (1: the serving node's one batch per
channel). No STAN protocol, no subscriber, no state records.

    python bench/cluster/jetstream_floor.py -n 400000 --batch 450 --rounds 3

Prints one JSON line per round, then the median. The default batch is about the serving
node's average under cluster_bench.py's load. ``--guid-header`` picks where each
message's publish ID goes: ``Stan-Guid`` (a plain header, what the store writes),
``Nats-Msg-Id`` (deduplicated by JetStream) or ``none``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from processes import free_port, stop_server, tree_cpu  # noqa: E402 - shared by the bench scripts

from stanpkg.stores.jetstream.layout import channel_subject, shared_stream_name  # noqa: E402
from stanpkg.stores.jetstream.record_codec import (  # noqa: E402
    HEADER_GUID,
    HEADER_MSG_ID,
    Write,
    atomic_batch_messages,
)
from stanpkg.stores.jetstream.stream_management import (  # noqa: E402
    ensure_stream,
    lead_stream_from,
    shared_stream_config,
)
from stanpkg.stores.jetstream.stream_writer import BatchWriter, WriteRound  # noqa: E402
from stanpkg.transport.connection import NatsConnection  # noqa: E402
from stanpkg.transport.embedded import find_nats_server_binary  # noqa: E402
from stanpkg.transport.errors import NoServersError  # noqa: E402
from stanpkg.transport.natsconf import EmbeddedNatsConfig, render_config  # noqa: E402
from stanpkg.transport.nuid import Nuid  # noqa: E402

CLUSTER_ID = "floor"
NAMES = ("a", "b", "c")


def start_servers(workdir: Path) -> tuple[list[subprocess.Popen[bytes]], str]:
    """Three clustered nats-servers with JetStream; the first one's client URL."""
    ports = {name: free_port() for name in NAMES}
    routes = {name: free_port() for name in NAMES}
    binary = find_nats_server_binary()
    procs = []
    for name in NAMES:
        config = EmbeddedNatsConfig(
            host="127.0.0.1",
            port=ports[name],
            cluster_listen=f"nats://127.0.0.1:{routes[name]}",
            cluster_name=CLUSTER_ID,
            routes=tuple(f"nats://127.0.0.1:{routes[o]}" for o in NAMES if o != name),
            server_name=name,
            jetstream_dir=str(workdir / name / "js"),
        )
        conf = workdir / f"{name}.conf"
        conf.write_text(render_config(config))
        log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
        )
    return procs, f"nats://127.0.0.1:{ports['a']}"


async def connect(url: str) -> NatsConnection:
    deadline = time.monotonic() + 30
    while True:
        try:
            return await NatsConnection.connect(url)
        except (OSError, NoServersError):  # not listening yet
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def prepare(conn: NatsConnection) -> str:
    """The shared stream, made as the store makes it and led from the writer's server."""
    config = shared_stream_config(CLUSTER_ID, 0, replicas=3)
    deadline = time.monotonic() + 60
    while True:
        try:
            await ensure_stream(conn, config)
            break
        except Exception:  # JetStream electing its metadata leader
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    stream = shared_stream_name(CLUSTER_ID, 0)
    here = str(conn.server_info.get("server_name", ""))
    while time.monotonic() < deadline:
        try:
            if await lead_stream_from(conn, stream, here) == "here":
                return stream
        except Exception:  # a step-down under way
            pass
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the leader of {stream} did not move to {here}")


async def write_round(
    conn: NatsConnection, count: int, size: int, batch: int, inflight: int, guid_header: str
) -> float:
    """Messages per second for ``count`` messages on a fresh channel subject."""
    writer = BatchWriter(conn)
    subject = channel_subject(CLUSTER_ID, 0, f"bench.{time.monotonic_ns()}")
    payload = b"x" * size
    nuid = Nuid()
    writer_id = nuid.next()  # as long as a leadership's (batch IDs are in every message)
    header = {"Nats-Msg-Id": HEADER_MSG_ID, "Stan-Guid": HEADER_GUID}.get(guid_header, "")
    info = await conn.request(f"$JS.API.STREAM.INFO.{shared_stream_name(CLUSTER_ID, 0)}", b"", 5.0)
    stream_last = int(json.loads(info)["state"]["last_seq"])
    # One writer: each batch's place in the stream is known before it is sent, so the
    # fence of a batch sent before the previous one is answered is still exact.
    fence, sequence, sent = 0, 1, 0
    outstanding: list[WriteRound] = []
    start = time.perf_counter()
    while sent < count or outstanding:
        while sent < count and len(outstanding) < inflight:
            n = min(batch, count - sent)
            stamp = time.time_ns()
            writes: list[Write] = [
                (sequence + i, nuid.next() if header else "", "", stamp, payload) for i in range(n)
            ]
            messages = atomic_batch_messages(
                writes, writer.batch_id(writer_id), fence, guid_header=header or HEADER_GUID
            )
            outstanding.append(writer.send(subject, messages))
            sequence += n
            sent += n
            stream_last += n
            fence = stream_last
        result = await writer.answer(outstanding.pop(0), 30.0)
        if not result.ok:
            raise RuntimeError(f"a batch was refused: {result.error}")
    return count / (time.perf_counter() - start)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="jsfloor-"))
    procs, url = start_servers(workdir)
    try:
        conn = await connect(url)
        try:
            await prepare(conn)
            rates = []
            per_message = 1e6 / args.count
            for round_ in range(args.rounds):
                servers_before = tree_cpu([proc.pid for proc in procs])["nats-server"]
                writer_before = _own_cpu()
                rate = await write_round(
                    conn, args.count, args.size, args.batch, args.inflight, args.guid_header
                )
                servers = tree_cpu([proc.pid for proc in procs])["nats-server"] - servers_before
                writer = _own_cpu() - writer_before
                rates.append(rate)
                line = {
                    "round": round_,
                    "msgs_per_s": round(rate),
                    "cpu_us_nats-server": round(servers * per_message, 2),
                    "cpu_us_writer": round(writer * per_message, 2),
                }
                print(json.dumps(line), flush=True)
            print(
                json.dumps(
                    {
                        "batch": args.batch,
                        "inflight": args.inflight,
                        "guid_header": args.guid_header,
                        "median_msgs_per_s": round(statistics.median(rates)),
                        "min": round(min(rates)),
                        "max": round(max(rates)),
                    }
                )
            )
        finally:
            await conn.close()
    finally:
        for proc in procs:
            stop_server(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--count", type=int, default=400_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=450, help="messages per atomic batch")
    parser.add_argument("--inflight", type=int, default=1, help="batches outstanding")
    parser.add_argument(
        "--guid-header", choices=("Nats-Msg-Id", "Stan-Guid", "none"), default="Stan-Guid"
    )
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
