"""Scaling with cores: K partitioned stanpkg processes (one nats-server) against the Go
reference (one process), loaded by C concurrent Go ``stan-bench`` instances, each on its
own channel; everything pinned to the first N cores.

    STANPKG_REFERENCE_DIR=/tmp/goref .venv/bin/python bench/scaling/run.py
    ... --cores 1,2 --processes 1,2 --instances 4 --msgs 20000 --rounds 1   # a trial

Rounds run every (cores, side) pair, the sides alternating who goes first. Each run is a
JSON line in ``runs.jsonl`` with the summed rates and the CPU seconds (utime + stime from
/proc) of every server process and of the stan-bench instances; ``summary.md`` has the
medians, the ratios to Go on the same cores and a projection to more cores from CPU per
message; ``scaling.png`` draws the curve.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from side_by_side_parts import procstat  # noqa: E402 - shared with side_by_side.py

from scaling.load import Load, run_instances  # noqa: E402
from scaling.report import write_report  # noqa: E402
from scaling.topology import Running, go_server, stanpkg_partitions  # noqa: E402

MISSING_REFERENCE = (
    "set STANPKG_REFERENCE_DIR to the directory of the Go reference's nats-streaming-server "
    "and stanbench (bench/side_by_side.py prints how to build them)"
)
ALLOWED_CORES = sorted(os.sched_getaffinity(0))


def pin(cores: int) -> None:
    """This process and every process it starts from now on run on the first N cores."""
    os.sched_setaffinity(0, ALLOWED_CORES[:cores])


def sides(processes: list[int]) -> list[tuple[str, int]]:
    """(side name, stanpkg processes; 0 for the Go reference)."""
    return [("go", 0), *((f"stanpkg×{k}", k) for k in processes)]


def servers(
    processes: int, instances: int, reference: Path, workdir: Path
) -> AbstractContextManager[Running]:
    if processes == 0:
        return go_server(reference)
    return stanpkg_partitions(processes, instances, workdir)


def cpu_now(running: Running) -> dict[str, float]:
    return {label: procstat.cpu_seconds(pid) for label, pid in running.pids.items()}


def run_once(processes: int, instances: int, load: Load, reference: Path) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="scaling-") as tmp,
        servers(processes, instances, reference, Path(tmp)) as running,
    ):
        before = cpu_now(running)
        result = run_instances(reference / "stanbench", running.url, load, instances)
        after = cpu_now(running)  # before the stop: the processes must still exist
    msgs = load.msgs * instances
    return {
        # every message published and delivered once, over the whole load's wall time: the
        # instances do not run exactly together, so the sum of their own rates reads high
        "rate": round(msgs / result.wall_s),
        "pub": round(sum(result.pub)),
        "sub": round(sum(result.sub)),
        "pub_each": result.pub,
        "sub_each": result.sub,
        "msgs": msgs,
        "wall_s": round(result.wall_s, 3),
        "cpu_s": {label: round(after[label] - before[label], 3) for label in after},
        "bench_cpu_s": round(result.bench_cpu_s, 3),
    }


def plan_runs(
    rounds: int, core_counts: list[int], all_sides: list[tuple[str, int]]
) -> Iterator[tuple[int, int, str, int]]:
    """(round, cores, side, processes), interleaved so a change in the shared machine's
    load hits every configuration rather than one; who goes first alternates."""
    for round_no in range(rounds):
        for cores in core_counts:
            order = all_sides if round_no % 2 == 0 else all_sides[::-1]
            for side, processes in order:
                yield round_no, cores, side, processes


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cores", default="1,2", help="core counts, comma-separated")
    parser.add_argument("--processes", default="1,2", help="stanpkg process counts")
    parser.add_argument("--instances", type=int, default=4, help="stan-bench instances (C)")
    parser.add_argument("--msgs", type=int, default=100_000, help="-n of each instance")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="default bench/results/scaling-<UTC time>/")
    parser.add_argument("--note", default="", help="added to the title (e.g. shared machine)")
    parser.add_argument("--title", help="with --from-runs: the title to write again")
    parser.add_argument(
        "--from-runs", type=Path, help="write the report again from a runs.jsonl, run nothing"
    )
    return parser.parse_args()


def run_all(args: argparse.Namespace, reference: Path, log: IO[str]) -> list[dict[str, Any]]:
    core_counts = [int(n) for n in args.cores.split(",")]
    if not all(1 <= n <= len(ALLOWED_CORES) for n in core_counts):
        raise SystemExit(f"--cores must be between 1 and {len(ALLOWED_CORES)}")
    all_sides = sides([int(k) for k in args.processes.split(",")])
    load = Load(args.msgs)
    runs = []
    for round_no, cores, side, processes in plan_runs(args.rounds, core_counts, all_sides):
        pin(cores)
        run: dict[str, Any] = {"round": round_no, "cores": cores, "side": side}
        run |= {"processes": processes or 1, "instances": args.instances}
        started = time.monotonic()
        try:
            run |= run_once(processes, args.instances, load, reference)
        except RuntimeError as exc:
            run["error"] = str(exc)
        run["elapsed_s"] = round(time.monotonic() - started, 1)
        runs.append(run)
        line = json.dumps(run)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()
    pin(len(ALLOWED_CORES))
    return runs


def main() -> int:
    args = parse_args()
    if args.from_runs:
        runs = [json.loads(line) for line in args.from_runs.read_text().splitlines() if line]
        write_report(args.from_runs.parent, runs, args.title or str(args.from_runs.parent))
        return 0
    reference = Path(os.environ.get("STANPKG_REFERENCE_DIR", "/nonexistent"))
    if not all((reference / b).is_file() for b in ("nats-streaming-server", "stanbench")):
        print(MISSING_REFERENCE, file=sys.stderr)
        return 2
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out or ROOT / "bench" / "results" / f"scaling-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the servers on kill too
    with open(out_dir / "runs.jsonl", "w") as log:
        runs = run_all(args, reference, log)
    title = (
        f"{args.instances} × stan-bench (1 pub + 1 sub, 128 B, -mpa 16384, -n {args.msgs}), "
        f"{args.rounds} round(s), {stamp}, {len(ALLOWED_CORES)}-CPU host"
        + (f", {args.note}" if args.note else "")
    )
    write_report(out_dir, runs, title)
    print(f"written: {out_dir}/runs.jsonl, summary.md, scaling.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
