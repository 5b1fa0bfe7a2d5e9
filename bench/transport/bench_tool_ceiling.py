"""How fast can ``stanpkg bench`` itself go? Runs it against the fake streaming server.

    .venv/bin/python bench/transport/bench_tool_ceiling.py [--n 200000] [--mpa 512,4096]

Starts nats-server (EmbeddedNatsServer) and ``python -m stanpkg.loadgen.fake_server`` (acks
every PubMsg at once), then runs ``python -m stanpkg.loadgen.cli`` in a subprocess and
reports the rate it prints plus its CPU time. ``msgs per CPU-second`` is the tool's ceiling
when it has a core to itself (wall-clock rates here share 2 cores with nats-server and the
fake server).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

from stanpkg.transport import EmbeddedNatsConfig, EmbeddedNatsServer


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of(pid: int) -> float:
    """CPU seconds used so far by a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_bench(url: str, extra: list[str], n: int, fake_pid: int) -> None:
    cmd = [sys.executable, "-m", "stanpkg.loadgen.cli", "-s", url, "-c", "ceiling", "-n", str(n)]
    before, fake_before = cpu_children(), cpu_of(fake_pid)
    result = subprocess.run([*cmd, *extra, "bench.subject"], capture_output=True, text=True)
    cpu = cpu_children() - before
    fake_cpu = cpu_of(fake_pid) - fake_before
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    first = result.stdout.splitlines()[0]
    rate = re.search(r"([\d,]+) msgs/sec", first)
    shown = rate.group(1) if rate else "?"
    print(
        f"{' '.join(extra):28} wall {shown:>9} msgs/s   bench CPU {cpu:5.2f}s"
        f" = {n / cpu:>9,.0f} msgs/CPU-s   (fake server {n / fake_cpu:,.0f} msgs/CPU-s)",
        flush=True,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--mpa", default="512,4096,16384")
    args = parser.parse_args()
    server = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=-1), on_log=lambda line: None, on_exit=print
    )
    await server.start()
    fake = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stanpkg.loadgen.fake_server",
        "-s",
        server.client_url,
        "-c",
        "ceiling",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert fake.stdout is not None
    await fake.stdout.readline()  # READY
    try:
        for mpa in args.mpa.split(","):
            await asyncio.to_thread(
                run_bench, server.client_url, ["-np", "1", "-mpa", mpa], args.n, fake.pid
            )
        await asyncio.to_thread(
            run_bench, server.client_url, ["-np", "4", "-mpa", "4096"], args.n, fake.pid
        )
    finally:
        fake.terminate()
        await fake.wait()
        await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
