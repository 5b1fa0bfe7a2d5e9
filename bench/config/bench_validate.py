"""Time ``stanpkg validate`` on generated configurations with many channels.

    .venv/bin/python bench/config/bench_validate.py [--sizes 1000,10000,100000]

For each size n it writes two configurations, one with n literal channels and one with
n channels of which a fifth are wildcards at several depths, then runs the whole
``stanpkg validate`` command (parse, collect, schema, rules, inheritance, printout) in a
fresh process and reports the wall time and the time per channel. Growth no worse than
n log n shows as a per-channel time that stays flat (or grows with log n).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def literal_config(n: int) -> str:
    lines = ["streaming {", "  store_limits {", "    max_channels: 0", "    channels {"]
    lines += [f'      "svc{i % 97}.orders.c{i}": {{ max_msgs: {i % 1000 + 1} }}' for i in range(n)]
    lines += ["    }", "  }", "}"]
    return "\n".join(lines) + "\n"


def wildcard_config(n: int) -> str:
    lines = ["streaming {", "  store_limits {", "    max_channels: 0", "    channels {"]
    for i in range(n):
        match i % 5:
            case 0:
                name = f"svc{i}.>"
            case 1:
                name = f"svc{i - 1}.*.events"
            case 2:
                name = f"svc{i - 2}.eu.*"
            case _:
                name = f"svc{i - i % 5}.eu.c{i}"
        lines.append(f'      "{name}": {{ max_age: "{i % 50 + 1}m" }}')
    lines += ["    }", "  }", "}"]
    return "\n".join(lines) + "\n"


def time_validate(path: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "stanpkg.cli", "validate", str(path)], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"validate failed on {path}:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    baseline = time_validate_empty()
    print(f"{'channels':>9} {'kind':>9} {'seconds':>8} {'µs/channel':>11} {'/(n log n) ratio':>17}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, make in (("literal", literal_config), ("wildcard", wildcard_config)):
            first = None
            for n in sizes:
                path = Path(tmp, f"{kind}-{n}.conf")
                path.write_text(make(n))
                seconds = time_validate(path) - baseline
                per = seconds / (n * math.log2(n))
                first = first or per
                print(
                    f"{n:>9} {kind:>9} {seconds:>8.2f} {seconds / n * 1e6:>11.1f} "
                    f"{per / first:>17.2f}"
                )
    print(f"(process start-up and an empty validate, {baseline:.2f}s, subtracted)")
    return 0


def time_validate_empty() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "empty.conf")
        path.write_text("")
        return min(time_validate(path) for _ in range(3))


if __name__ == "__main__":
    sys.exit(main())
