"""Benchmark: export a 1M-message FILE store to Parquet with ``stanpkg export``'s job.

Generates the store with stanpkg's FILE store writers (4 channels x 250k messages,
distinct random payloads of 100 to 300 bytes, 50k messages per slice = 20 slices), then
runs the export once per Spark master in a fresh process (so each pays its own JVM start,
reported apart) and prints one JSON line per run plus a table.

    .venv/bin/python bench/pipeline/bench_export.py [--messages N] [--masters local[1],local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHANNELS = ("orders.eu", "orders.us", "payments", "audit")
BASE_TS = 1_700_000_000_000_000_000


def generate(root: Path, messages: int, per_slice: int) -> float:
    from stanpkg.stores.base import ServerInfo
    from stanpkg.stores.file.format import ChannelWriter, SliceLimits, write_server_file

    started = time.perf_counter()
    root.mkdir(parents=True)
    write_server_file(str(root / "server.dat"), ServerInfo.for_cluster("bench", "_STAN.discover"))
    per_channel = messages // len(CHANNELS)
    # Distinct payloads (windows of one random buffer), so Parquet cannot just dictionary-
    # encode a handful of values.
    blob = os.urandom(1 << 20)
    for name in CHANNELS:
        limits = SliceLimits(max_msgs=per_slice, max_bytes=0)
        with ChannelWriter(str(root / name), name, slice_limits=limits) as writer:
            for seq in range(1, per_channel + 1):
                start = (seq * 7919) % ((1 << 20) - 400)
                payload = blob[start : start + 100 + 50 * (seq % 5)]
                writer.append(seq, payload, BASE_TS + seq * 1_000_000)
    return time.perf_counter() - started


def decode_only(store: Path) -> dict[str, object]:
    """The data source's own share: plan + decode every slice into Arrow, one core."""
    from stanpkg.pipeline.batches import read_task_batches
    from stanpkg.pipeline.options import ReadOptions
    from stanpkg.pipeline.planning import plan_read

    started = time.perf_counter()
    plan = plan_read(ReadOptions.parse({"path": str(store)}, environ={}))
    rows = sum(
        batch.num_rows
        for task in plan.tasks
        for batch in read_task_batches(task, plan.reader, permissive=False)
    )
    seconds = time.perf_counter() - started
    return {"decode_only_messages": rows, "seconds": round(seconds, 1),
            "msgs_per_s": round(rows / seconds)}  # fmt: skip


def run_one(store: str, out: str, master: str) -> dict[str, object]:
    """One export in this process (the child side)."""
    from stanpkg.pipeline.export import ExportRequest, prepare_export, run_export
    from stanpkg.pipeline.session import spark_session
    from stanpkg.pipeline.state import open_state_store

    started = time.perf_counter()
    spark = spark_session(master, app_name="stanpkg-bench", progress=False)
    spark.range(1).count()  # JVM and Python workers up
    startup = time.perf_counter() - started
    request = ExportRequest(out=out, datastore=store)
    store_state = open_state_store(out)
    plan_started = time.perf_counter()
    job = prepare_export(request, store_state)
    planning = time.perf_counter() - plan_started
    result = run_export(spark, job, store_state, progress=lambda line: None)
    spark.stop()
    files = list(Path(out).rglob("*.parquet"))
    return {
        "master": master,
        "messages": result.messages,
        "payload_mb": round(result.payload_bytes / 1e6, 1),
        "parquet_mb": round(sum(f.stat().st_size for f in files) / 1e6, 1),
        "slices": job.slices,
        "startup_s": round(startup, 1),
        "driver_planning_s": round(planning, 2),
        "job_s": round(result.seconds, 1),
        "msgs_per_s": round(result.messages / result.seconds),
        "mb_per_s": round(result.payload_bytes / 1e6 / result.seconds, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--per-slice", type=int, default=50_000)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--child", nargs=3, metavar=("STORE", "OUT", "MASTER"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(*args.child)), flush=True)
        return 0
    work = Path(tempfile.mkdtemp(prefix="stanpkg-bench-"))
    try:
        store = work / "datastore"
        seconds = generate(store, args.messages, args.per_slice)
        size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) / 1e6
        print(f"generated {args.messages:,} messages ({size:,.0f} MB on disk) in {seconds:.1f} s")
        print(json.dumps(decode_only(store)))
        results = []
        for master in args.masters.split(","):
            out = work / f"out-{len(results)}"
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(store), str(out), master],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(result)
            print(json.dumps(result))
        print()
        print("| master | messages | job s | msgs/s | payload MB/s | JVM start s | parquet MB |")
        print("|---|---|---|---|---|---|---|")
        for r in results:
            print(
                f"| {r['master']} | {r['messages']:,} | {r['job_s']} | {r['msgs_per_s']:,} | "
                f"{r['mb_per_s']} | {r['startup_s']} | {r['parquet_mb']} |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
