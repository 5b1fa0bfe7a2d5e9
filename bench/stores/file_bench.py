"""FILE store benchmarks: ``stanpkg bench`` against ``stanpkg run -st file``, and recovery.

Scenarios (each on a fresh store directory, server in its own process):

* ``pubsub``: 1 publisher + 1 subscriber at once, 128-byte messages (``-mpa`` as given);
* ``sync``: synchronous publishes (publish, wait for the PubAck, repeat);
* ``recovery``: write a store of N messages with the FILE store itself, then time
  ``FileStore.recover`` on it (msgs/s), sequential and with ``parallel_recovery``.

Usage::

    python bench/stores/file_bench.py pubsub [-n 200000] [--mpa 512] [--dir /tmp/x]
    python bench/stores/file_bench.py sync [-n 3000]
    python bench/stores/file_bench.py recovery [-n 1000000] [--channels 1] [--parallel 1]
    python bench/stores/file_bench.py fsync [-n 1000]     # the disk's ceiling for "sync"

Extra server flags go in ``--server-args "..."`` (e.g. ``--file_sync=false``); ``--store
memory`` runs the same load on the MEMORY store for comparison. Results are printed as
one JSON object per run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STANPKG = [sys.executable, "-c", "import sys; from stanpkg.cli import main; sys.exit(main())"]
sys.path.insert(0, str(ROOT / "bench"))
from processes import free_port, stop_server  # noqa: E402 - shared by the bench scripts


def start_server(
    store: str, directory: Path, extra: list[str]
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    argv = [*STANPKG, "run", "-a", "127.0.0.1", "-p", str(port), "-cid", "bench", "-st", store]
    if store == "file":
        argv += ["--dir", str(directory)]
    proc = subprocess.Popen(
        [*argv, *extra], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    for raw in proc.stderr:
        if b"Streaming Server is ready" in raw:
            return proc, port
    raise RuntimeError(f"server did not start (exit {proc.wait()})")


def run_bench(port: int, args: list[str]) -> dict[str, float]:
    out = subprocess.run(
        [*STANPKG, "bench", "-s", f"nats://127.0.0.1:{port}", "-c", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    rates = {}
    for label, key in (("Pub stats", "pub"), ("Sub stats", "sub"), ("Pub/Sub stats", "total")):
        m = re.search(r"^\s*" + re.escape(label) + r": ([\d,]+) msgs/sec", out, re.M)
        if m:
            rates[key] = float(m.group(1).replace(",", ""))
    return rates


def load(args: argparse.Namespace, bench_args: list[str]) -> dict[str, object]:
    base = Path(args.dir or tempfile.mkdtemp(prefix="stan-file-bench-"))
    directory = base / "store"
    shutil.rmtree(directory, ignore_errors=True)
    proc, port = start_server(args.store, directory, args.server_args.split())
    try:
        rates = run_bench(port, bench_args)
    finally:
        stop_server(proc)
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return {"store": args.store, "server_args": args.server_args, "bench_args": bench_args, **rates}


def recovery(args: argparse.Namespace) -> dict[str, object]:
    # Imported here: the load scenarios only need the CLI in subprocesses.
    from stanpkg.plan.compile import compile_args
    from stanpkg.stores.base import MessageBatch
    from stanpkg.stores.file import FileStore, config_from_plan

    class Quiet:
        def notice(self, text: str) -> None:
            print(text, file=sys.stderr)

        warn = error = notice

    base = Path(args.dir or tempfile.mkdtemp(prefix="stan-file-recovery-"))
    directory = base / "store"
    shutil.rmtree(directory, ignore_errors=True)
    flags = ["-st", "file", "--dir", str(directory), "-cid", "bench", "--max_msgs", "0"]
    flags += ["--max_bytes", "0", *args.server_args.split()]
    plan = compile_args(flags, env={}).plan
    assert plan is not None
    store = FileStore(config_from_plan(plan), Quiet())
    store.recover()
    store.init(_info())
    payload = os.urandom(128)
    per_channel = args.n // args.channels
    started = time.perf_counter()
    for c in range(args.channels):
        channel = store.create_channel(f"ch.{c}")
        for first in range(1, per_channel + 1, 1000):
            count = min(1000, per_channel - first + 1)
            channel.msgs.store(MessageBatch(time.time_ns(), [("", payload)] * count))
    store.close()
    write_s = time.perf_counter() - started
    results: dict[str, object] = {
        "messages": per_channel * args.channels,
        "channels": args.channels,
    }
    results["write_msgs_per_s"] = round(per_channel * args.channels / write_s)
    for parallel in sorted({1, args.parallel}):
        flags_p = [*flags, "--file_parallel_recovery", str(parallel)]
        plan = compile_args(flags_p, env={}).plan
        assert plan is not None
        store = FileStore(config_from_plan(plan), Quiet())
        started = time.perf_counter()
        state = store.recover()
        elapsed = time.perf_counter() - started
        assert state is not None
        total = sum(ch.store.msgs.state()[0] for ch in state.channels)
        store.close()
        results[f"recover_s_parallel_{parallel}"] = round(elapsed, 3)
        results[f"recover_msgs_per_s_parallel_{parallel}"] = round(total / elapsed)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return results


def fsync_ceiling(args: argparse.Namespace) -> dict[str, object]:
    """What the disk allows one synchronous publisher: append a record to a data file
    and an index file and fsync both, in parallel (as the store does) and one after the
    other (as the reference does), N times each."""
    from concurrent.futures import ThreadPoolExecutor

    base = Path(args.dir or tempfile.mkdtemp(prefix="stan-fsync-"))
    base.mkdir(parents=True, exist_ok=True)
    dat = os.open(base / "d", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    idx = os.open(base / "i", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    n = args.n or 1000
    results: dict[str, object] = {"n": n, "dir": str(base)}
    with ThreadPoolExecutor(2) as pool:
        for mode in ("parallel", "sequential"):
            started = time.perf_counter()
            for _ in range(n):
                os.write(dat, b"x" * 150)
                os.write(idx, b"y" * 32)
                if mode == "parallel":
                    job = pool.submit(os.fsync, dat)
                    os.fsync(idx)
                    job.result()
                else:
                    os.fsync(dat)
                    os.fsync(idx)
            results[f"{mode}_fsyncs_per_s"] = round(n / (time.perf_counter() - started))
    os.close(dat)
    os.close(idx)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return results


def _info():  # type: ignore[no-untyped-def]
    from stanpkg.stores.base import ServerInfo

    return ServerInfo("bench", "_STAN.discover.bench", "p", "s", "u", "c", "sc", "a")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", choices=("pubsub", "sync", "recovery", "fsync"))
    parser.add_argument("-n", type=int, default=0)
    parser.add_argument("--mpa", type=int, default=512)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--store", default="file")
    parser.add_argument("--dir", default="")
    parser.add_argument("--server-args", default="")
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.repeat):
        if args.scenario == "pubsub":
            n = args.n or 200_000
            bench = [
                "-np",
                "1",
                "-ns",
                "1",
                "-n",
                str(n),
                "-ms",
                str(args.size),
                "-mpa",
                str(args.mpa),
                "foo",
            ]
            result = load(args, bench)
        elif args.scenario == "sync":
            n = args.n or 3000
            result = load(
                args, ["-np", "1", "-ns", "0", "-n", str(n), "-ms", str(args.size), "-sync", "foo"]
            )
        elif args.scenario == "fsync":
            result = fsync_ceiling(args)
        else:
            args.n = args.n or 1_000_000
            result = recovery(args)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
