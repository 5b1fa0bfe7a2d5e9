"""Raw NATS throughput: stanpkg's NatsConnection vs nats-py, through a real nats-server.

    .venv/bin/python bench/transport/nats_throughput.py [--n 300000] [--size 128] [--loop uvloop]

Two scenarios, each run for both client implementations (every role is its own process):

* pubsub: one publisher connection → one subscriber connection.
* relay:  publisher → subject A → relay process (subscribes to A, republishes every message
  on B with a second connection, as the streaming server does) → subscriber of B.

Reported per run: wall-clock messages/s at the final subscriber (first to last message), and
messages per CPU-second of the measured process (the subscriber for pubsub, the relay for
relay), from its first to its last message. On a shared or small machine the CPU figure is
the stable one: it is what one core can do, whatever else competes for the cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from stanpkg.transport import EmbeddedNatsConfig, EmbeddedNatsServer, NatsConnection

PENDING_CAP = 4 * 1024 * 1024


def install_loop(name: str) -> None:
    if name == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def ready() -> None:
    print("READY", flush=True)


class Meter:
    """Counts messages; wall and CPU time from the first to the n-th one."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.wall = self.cpu = 0.0
        self.done = asyncio.get_running_loop().create_future()

    def hit(self) -> None:
        self.count += 1
        if self.count == 1:
            self.wall, self.cpu = time.perf_counter(), time.process_time()
        if self.count == self.n:
            self.wall = time.perf_counter() - self.wall
            self.cpu = time.process_time() - self.cpu
            self.done.set_result(None)

    def result(self) -> dict[str, Any]:
        return {"msgs": self.n, "secs": self.wall, "cpu": self.cpu}


# -- roles, stanpkg ------------------------------------------------------------------------
async def ours_sub(url: str, subject: str, n: int) -> dict[str, Any]:
    nc = await NatsConnection.connect(url)
    meter = Meter(n)
    hit = meter.hit
    nc.subscribe(subject, lambda subj, reply, payload: hit())
    await nc.flush()
    ready()
    await meter.done
    await nc.close()
    return meter.result()


async def relay_result(meter: Meter, inbound: Any, outbound: Any) -> dict[str, Any]:
    """Announce readiness, wait for the last message, let the relayed ones out, close.
    The connections are ours or nats-py's: both have ``flush(timeout)`` and ``close()``."""
    ready()
    await meter.done
    await outbound.flush(30)
    await inbound.close()
    await outbound.close()
    return meter.result()


async def ours_relay(url: str, src: str, dst: str, n: int) -> dict[str, Any]:
    inbound = await NatsConnection.connect(url)
    outbound = await NatsConnection.connect(url)
    outbound.pause_reading_with(inbound)
    meter = Meter(n)
    hit, publish = meter.hit, outbound.publish

    def handler(subj: str, reply: str, payload: bytes) -> None:
        publish(dst, payload)
        hit()

    inbound.subscribe(src, handler)
    await inbound.flush()
    return await relay_result(meter, inbound, outbound)


async def ours_pub(url: str, subject: str, n: int, size: int) -> dict[str, Any]:
    nc = await NatsConnection.connect(url)
    payload = b"x" * size
    publish = nc.publish
    start = time.perf_counter()
    for i in range(n):
        publish(subject, payload)
        if i % 512 == 0:
            await asyncio.sleep(0)
            while nc.pending_bytes > PENDING_CAP:
                await asyncio.sleep(0.0005)
    await nc.flush(60)
    secs = time.perf_counter() - start
    await nc.close()
    return {"msgs": n, "secs": secs}


# -- roles, nats-py ------------------------------------------------------------------------
async def natspy_sub(url: str, subject: str, n: int) -> dict[str, Any]:
    import nats

    nc = await nats.connect(url)
    meter = Meter(n)

    async def handler(msg: Any) -> None:
        meter.hit()

    await nc.subscribe(subject, cb=handler, pending_msgs_limit=10_000_000, pending_bytes_limit=-1)
    await nc.flush()
    ready()
    await meter.done
    await nc.close()
    return meter.result()


async def natspy_relay(url: str, src: str, dst: str, n: int) -> dict[str, Any]:
    import nats

    inbound = await nats.connect(url)
    outbound = await nats.connect(url, pending_size=64 * 1024 * 1024)
    meter = Meter(n)

    async def handler(msg: Any) -> None:
        await outbound.publish(dst, msg.data)
        meter.hit()

    await inbound.subscribe(src, cb=handler, pending_msgs_limit=10_000_000, pending_bytes_limit=-1)
    await inbound.flush()
    return await relay_result(meter, inbound, outbound)


async def natspy_pub(url: str, subject: str, n: int, size: int) -> dict[str, Any]:
    import nats

    nc = await nats.connect(url, pending_size=64 * 1024 * 1024)
    payload = b"x" * size
    start = time.perf_counter()
    for _ in range(n):
        await nc.publish(subject, payload)
    await nc.flush(60)
    secs = time.perf_counter() - start
    await nc.close()
    return {"msgs": n, "secs": secs}


# -- driver --------------------------------------------------------------------------------
def run_role(args: argparse.Namespace) -> None:
    install_loop(args.loop)
    impl = {
        "ours": (ours_sub, ours_relay, ours_pub),
        "natspy": (natspy_sub, natspy_relay, natspy_pub),
    }
    sub, relay, pub = impl[args.impl]
    if args.role == "sub":
        result = asyncio.run(sub(args.url, args.subject, args.n))
    elif args.role == "relay":
        result = asyncio.run(relay(args.url, "bench.a", "bench.b", args.n))
    else:
        result = asyncio.run(pub(args.url, args.subject, args.n, args.size))
    print("RESULT " + json.dumps(result), flush=True)


def spawn(
    role: str, impl: str, url: str, args: argparse.Namespace, subject: str
) -> subprocess.Popen[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--role", role, "--impl", impl, "--url", url]
    cmd += ["--n", str(args.n), "--size", str(args.size), "--loop", args.loop, "--subject", subject]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY":
        raise RuntimeError(f"role did not start: {line!r}")


def result_of(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    out, _ = proc.communicate(timeout=600)
    for line in out.splitlines():
        if line.startswith("RESULT "):
            parsed: dict[str, Any] = json.loads(line[7:])
            return parsed
    raise RuntimeError(f"no result (exit {proc.returncode})")


def scenario(mode: str, impl: str, url: str, args: argparse.Namespace) -> tuple[float, float]:
    """(wall msgs/s at the final subscriber, msgs per CPU-second of the measured process)."""
    final_subject = "bench.b" if mode == "relay" else "bench.a"
    sub = spawn("sub", impl, url, args, final_subject)
    wait_ready(sub)
    relay = None
    if mode == "relay":
        relay = spawn("relay", impl, url, args, "bench.a")
        wait_ready(relay)
    pub = spawn("pub", impl, url, args, "bench.a")
    pub_result = result_of(pub)
    relay_result = result_of(relay) if relay is not None else None
    sub_result = result_of(sub)
    rate = sub_result["msgs"] / sub_result["secs"]
    measured = relay_result or sub_result  # the relay is what the server does
    cpu_rate = measured["msgs"] / max(measured["cpu"], 1e-9)
    pub_rate = pub_result["msgs"] / pub_result["secs"]
    print(
        f"{mode:7} {impl:7} loop={args.loop:8} wall {rate:>9,.0f} msgs/s   "
        f"{'relay' if relay else 'sub'} CPU {cpu_rate:>9,.0f} msgs/CPU-s"
        f"   (publisher {pub_rate:,.0f} msgs/s)",
        flush=True,
    )
    return rate, cpu_rate


async def serve(args: argparse.Namespace) -> None:
    # Generous limits so that a slow subscriber is measured, not disconnected.
    config = EmbeddedNatsConfig(
        host="127.0.0.1", port=-1, passthrough='max_pending: 1GB\nwrite_deadline: "60s"\n'
    )
    server = EmbeddedNatsServer(config, on_log=lambda line: None, on_exit=lambda code: None)
    await server.start()
    try:
        summary = []
        for mode in args.modes.split(","):
            for impl in args.impls.split(","):
                runs = []
                for _ in range(args.repeat):
                    runs.append(
                        await asyncio.to_thread(scenario, mode, impl, server.client_url, args)
                    )
                summary.append((mode, impl, runs))
        print(f"\nmedians of {args.repeat} runs, loop={args.loop}, {args.size}-byte payloads:")
        for mode, impl, runs in summary:
            wall = sorted(r[0] for r in runs)[len(runs) // 2]
            cpu = sorted(r[1] for r in runs)[len(runs) // 2]
            print(f"  {mode:7} {impl:7} wall {wall:>9,.0f} msgs/s   {cpu:>9,.0f} msgs/CPU-s")
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop")
    parser.add_argument("--modes", default="pubsub,relay")
    parser.add_argument("--impls", default="ours,natspy")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--role", choices=("sub", "relay", "pub"))
    parser.add_argument("--impl", default="ours")
    parser.add_argument("--url", default="")
    parser.add_argument("--subject", default="bench.a")
    args = parser.parse_args()
    if args.role:
        run_role(args)
    else:
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
