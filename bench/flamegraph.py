"""Where stanpkg's server spends its time in one side-by-side scenario: the server runs
under ``py-spy record`` while the Go ``stan-bench`` loads it as in side_by_side.py.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/flamegraph.py mem_async fanout

Writes ``bench/results/profiles/<scenario>.svg`` (a flame graph; open it in a browser) and
``<scenario>.txt``: the functions with the most self time (the frame on top of the stack)
and the most inclusive time (anywhere in the stack), as shares of the samples. py-spy
writes one format per recording, so each scenario runs twice: once for the SVG, once for
the raw collapsed stacks the text is made from. Only the Python server is sampled; its
nats-server child is Go (side_by_side.py gives its CPU per message). py-spy is in the
optional ``bench`` extra.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from processes import stop_server
from side_by_side import BUILD_HINT, ROOT, RUN, Side, run_bench, start_server
from side_by_side_parts.scenarios import SCENARIOS, Scenario

PROFILES = ROOT / "bench" / "results" / "profiles"  # not committed
TOP = 25


def record(
    scenario: Scenario, bench: Path, fmt: str, path: Path, *, rate: int, max_msgs: int | None
) -> None:
    """One run of the scenario with py-spy attached to the server once it is ready (so
    imports and start-up stay out of the profile), written to path in fmt."""
    py_spy = shutil.which("py-spy", path=str(ROOT / ".venv/bin")) or shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("py-spy is missing: pip install 'stanpkg[bench]'")
    side = Side("head", [str(ROOT / ".venv/bin/python"), "-c", RUN, "run"], ROOT)
    store = tempfile.mkdtemp(prefix="profile-")
    server, port = start_server(side, scenario, store)
    spy_argv = [py_spy, "record", "--pid", str(server.pid), "--format", fmt]
    # --function: one frame per function rather than per line; --nonblocking: py-spy does
    # not pause the server to sample it, so the load is the same as without it.
    spy_argv += ["--output", str(path), "--rate", str(rate), "--function", "--nonblocking"]
    spy = subprocess.Popen(spy_argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert spy.stdout is not None
        said = []
        for line in spy.stdout:  # "Sampling process ..." once attached
            said.append(line)
            if "Sampling" in line:
                break
        else:
            raise SystemExit(f"py-spy did not attach (it needs ptrace rights): {''.join(said)}")
        argv = [str(bench), "-s", f"nats://127.0.0.1:{port}", "-c", "bench"]
        run_bench([*argv, *scenario.bench_argv(max_msgs), "foo"])
    finally:
        stop_server(server)  # py-spy writes its file once its target exits
        try:
            spy.wait(60)
        except subprocess.TimeoutExpired:
            spy.send_signal(signal.SIGINT)
            spy.wait()
        shutil.rmtree(store, ignore_errors=True)
    if not path.exists():
        rest = spy.stdout.read() if spy.stdout else ""
        raise SystemExit(f"py-spy wrote no {path} (exit {spy.returncode}): {rest}")


def parse_collapsed(text: str) -> tuple[Counter[str], Counter[str], int]:
    """Self and inclusive sample counts per function from py-spy's raw (collapsed) output:
    one line per distinct stack, ``frame;frame;...;frame count``, outermost first."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        for frame in set(frames):  # a recursive function counts once per sample
            inclusive[frame] += count
    return self_time, inclusive, total


def report(self_time: Counter[str], inclusive: Counter[str], total: int, title: str) -> str:
    lines = [title, f"{total} samples of the Python server's threads (idle excluded)", ""]
    for name, counts in (("self time", self_time), ("inclusive time", inclusive)):
        lines += [f"top {TOP} by {name}:"]
        for frame, count in counts.most_common(TOP):
            lines.append(f"{100 * count / max(total, 1):6.1f}%  {frame}")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--max-msgs", type=int, help="cap the scenario's -n")
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=PROFILES)
    args = parser.parse_args()
    reference = Path(os.environ.get("STANPKG_REFERENCE_DIR", "/nonexistent"))
    if not (reference / "stanbench").is_file():
        print(BUILD_HINT, file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.scenarios:
        scenario = SCENARIOS[name]
        svg = args.out / f"{name}.svg"
        bench = reference / "stanbench"
        record(scenario, bench, "flamegraph", svg, rate=args.rate, max_msgs=args.max_msgs)
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "stacks.txt"
            record(scenario, bench, "raw", raw, rate=args.rate, max_msgs=args.max_msgs)
            counts = parse_collapsed(raw.read_text())
        title = f"{name}: {scenario.title}, -n {scenario.count(args.max_msgs)}"
        (args.out / f"{name}.txt").write_text(report(*counts, title))
        print(f"written: {svg}, {args.out / f'{name}.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
