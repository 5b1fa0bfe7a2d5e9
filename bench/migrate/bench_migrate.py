"""Benchmark: ``stanpkg migrate`` of a 1M-message FILE store into JetStream.

Writes the store with stanpkg's FILE store writers (the export benchmark's generator: 4
channels x 250k messages, payloads of 100 to 300 bytes), starts one nats-server with
JetStream (file storage, in a temporary directory), then measures side by side:

* ``read``: the migration's source alone (recover + decode every message, one core);
* ``write``: the migration's destination alone — the same number of messages and bytes,
  made in memory, written through migrate's destination (its channel logs' atomic batches, 4
  channels at once) — i.e. what JetStream takes from this writer;
* ``migrate``: the real command (``stanpkg migrate --format json``), reading and writing.

If ``migrate`` is close to ``write`` and far below ``read``, JetStream's write rate is the
limit, as it should be.

    .venv/bin/python bench/migrate/bench_migrate.py [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.pipeline.bench_export import CHANNELS, generate  # noqa: E402
from bench.processes import free_port, stop_server  # noqa: E402

NATS_SERVER = ROOT / ".venv" / "bin" / "nats-server"
CHUNK = 10_000
STANPKG = (str(ROOT / ".venv" / "bin" / "stanpkg"), "migrate")
QUIET_JSON = ("--format", "json", "--progress-every", "0")


def start_jetstream(where: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [str(NATS_SERVER), "-js", "-sd", str(where), "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"nats://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return proc, url
        time.sleep(0.05)
    raise RuntimeError("nats-server did not start")


def read_only(config: Path) -> dict[str, object]:
    from stanpkg.migrate.source_factory import open_source_store
    from stanpkg.plan.compile import compile_args

    started = time.perf_counter()
    plan = compile_args(["-sc", str(config)], {}).plan
    assert plan is not None
    source = open_source_store(plan, wants_channel=lambda _: True)
    count = size = 0
    for channel in source.channels:
        for message in source.messages(channel.name):
            count += 1
            size += len(message.data)
    return _figures("read", count, size, time.perf_counter() - started)


async def _write_channel(url: str, channel: str, count: int, blob: bytes) -> int:
    """The channel's messages written as migrate writes them (its destination's channel
    log, in chunks), without reading a source: the write half alone."""
    from stanpkg.migrate.destination import Destination
    from stanpkg.transport.endpoint import NatsEndpoint

    destination = await Destination.open(NatsEndpoint(url), "bench-write", 1)
    log = destination.channel_log(channel)
    plan = await destination.plan_channel(channel, 1, count)
    await destination.prepare(log, plan, replace=True, first_seq=1)
    size = 0
    for seq in range(1, count + 1):
        start = (seq * 7919) % ((1 << 20) - 400)  # the generator's payload sizes
        payload = blob[start : start + 100 + 50 * (seq % 5)]
        size += len(payload)
        log.append(seq, "", 1_700_000_000_000_000_000 + seq, payload, f"b-{seq}")
        if seq % CHUNK == 0:
            await log.flush()
    await log.flush()
    await destination.close()
    return size


def write_only(url: str, messages: int) -> dict[str, object]:
    blob = os.urandom(1 << 20)
    per_channel = messages // len(CHANNELS)

    async def all_channels() -> int:
        sizes = await asyncio.gather(
            *(_write_channel(url, name, per_channel, blob) for name in CHANNELS)
        )
        return sum(sizes)

    started = time.perf_counter()
    size = asyncio.run(all_channels())
    return _figures("write", per_channel * len(CHANNELS), size, time.perf_counter() - started)


def migrate(config: Path, url: str) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run(
        [*STANPKG, "--config", str(config), "--nats", url, *QUIET_JSON],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    figures = json.loads(done.stdout)["figures"]
    result = _figures("migrate", figures["messages"], figures["bytes"], figures["seconds"])
    result["process_s"] = round(wall, 1)  # with the start, the recovery and the records
    return result


def _figures(what: str, count: int, size: int, seconds: float) -> dict[str, object]:
    return {
        "what": what,
        "messages": count,
        "payload_mb": round(size / 1e6, 1),
        "seconds": round(seconds, 1),
        "msgs_per_s": round(count / seconds),
        "mb_per_s": round(size / seconds / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp:
        work = Path(tmp)
        store = work / "store"
        made = generate(store, args.messages, 50_000)
        print(f"store written in {made:.1f} s", file=sys.stderr)
        config = work / "stan.conf"
        config.write_text(f'streaming {{ id: "bench", store: "file", dir: "{store}" }}\n')
        results = [read_only(config)]
        proc, url = start_jetstream(work / "js")
        try:
            results.append(write_only(url, args.messages))
            results.append(migrate(config, url))
        finally:
            stop_server(proc)
    for result in results:
        print(json.dumps(result))
    read, write, moved = (r["msgs_per_s"] for r in results)
    assert isinstance(read, int) and isinstance(write, int) and isinstance(moved, int)
    print("| step | messages | payload MB | s | msgs/s | MB/s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['what']} | {r['messages']:,} | {r['payload_mb']} | {r['seconds']} | "
            f"{r['msgs_per_s']:,} | {r['mb_per_s']} |"
        )
    print(f"migrate / write alone: {moved / write:.2f}; migrate / read alone: {moved / read:.2f}")


if __name__ == "__main__":
    main()
