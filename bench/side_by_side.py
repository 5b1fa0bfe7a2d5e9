"""Side by side: stanpkg (this checkout, and optionally a baseline checkout) and the Go
reference server, loaded by the same Go ``stan-bench`` client, alternating run by run.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/side_by_side.py --rounds 3
    STANPKG_BASELINE_DIR=/tmp/baseline ... --scenarios mem_async,file_async512

``STANPKG_REFERENCE_DIR`` holds ``nats-streaming-server`` and ``stanbench`` as
../shared/reference/build.sh builds them (``apt-get install golang-go``, then run it with
the three public repositories cloned beside it). ``STANPKG_BASELINE_DIR`` is another
checkout of stanpkg with its own ``.venv`` (to compare two commits); each checkout runs
with its own interpreter. Every run is printed as a JSON line; the summary gives the
median of each side and the ratios of medians, which are the only figures to quote:
absolute rates on this machine vary by 30 % from one hour to the next.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from processes import free_port, stop_server  # noqa: E402 - shared by the bench scripts

RUN = "import sys; from stanpkg.cli import main; sys.exit(main())"
# server flags, stan-bench flags
SCENARIOS: dict[str, tuple[list[str], list[str]]] = {
    "mem_async": (["-st", "memory"], ["-np", "1", "-ns", "1", "-n", "200000", "-mpa", "16384"]),
    "mem_sync": (["-st", "memory"], ["-np", "1", "-ns", "0", "-n", "4000", "-sync"]),
    "file_async512": (["-st", "file"], ["-np", "1", "-ns", "1", "-n", "150000", "-mpa", "512"]),
    "file_sync": (["-st", "file"], ["-np", "1", "-ns", "0", "-n", "1500", "-sync"]),
    "file_enc512": (
        ["-st", "file", "-encrypt", "-encryption_key", "bench"],
        ["-np", "1", "-ns", "1", "-n", "100000", "-mpa", "512"],
    ),
}
RATE = r"^\s*(?:NATS Streaming )?{label}: ([\d,]+) msgs/sec"


def _servers(reference: Path, baseline: Path | None) -> dict[str, tuple[list[str], Path]]:
    servers = {"head": ([str(ROOT / ".venv/bin/python"), "-c", RUN, "run"], ROOT)}
    if baseline is not None:
        servers["base"] = ([str(baseline / ".venv/bin/python"), "-c", RUN, "run"], baseline)
    servers["go"] = ([str(reference / "nats-streaming-server")], reference)
    return servers


def run_once(
    command: list[str], cwd: Path, bench: Path, scenario: str, *, msg_size: int
) -> dict[str, float]:
    server_args, bench_args = SCENARIOS[scenario]
    store = tempfile.mkdtemp(prefix="side-by-side-")
    port = free_port()
    argv = [*command, "-a", "127.0.0.1", "-p", str(port), "-cid", "bench", *server_args]
    if "file" in server_args:
        argv += ["-dir", os.path.join(store, "store")]
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    for line in proc.stderr:
        if b"Streaming Server is ready" in line:
            break
    else:
        raise RuntimeError(f"{argv[0]} did not start")
    stderr = proc.stderr
    threading.Thread(target=lambda: stderr.read(), daemon=True).start()
    try:
        out = subprocess.run(
            [
                str(bench),
                "-s",
                f"nats://127.0.0.1:{port}",
                "-c",
                "bench",
                *bench_args,
                "-ms",
                str(msg_size),
                "foo",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        ).stdout
    finally:
        stop_server(proc)
        shutil.rmtree(store, ignore_errors=True)
    return parse_rates(out)


def parse_rates(out: str) -> dict[str, float]:
    """stan-bench's published and received msgs/sec."""
    rates = {}
    for label, key in (("Pub stats", "pub"), ("Sub stats", "sub")):
        found = re.search(RATE.format(label=re.escape(label)), out, re.M)
        if found:
            rates[key] = float(found.group(1).replace(",", ""))
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--msg-size", type=int, default=128)
    args = parser.parse_args()
    reference = os.environ.get("STANPKG_REFERENCE_DIR", "")
    if not reference or not (Path(reference) / "stanbench").exists():
        print(
            "set STANPKG_REFERENCE_DIR to a directory with the Go reference's "
            "nats-streaming-server and stanbench (build them with "
            "../shared/reference/build.sh; it needs golang-go)",
            file=sys.stderr,
        )
        return 2
    baseline = os.environ.get("STANPKG_BASELINE_DIR")
    servers = _servers(Path(reference), Path(baseline) if baseline else None)
    bench = Path(reference) / "stanbench"
    results: dict[tuple[str, str, str], list[float]] = {}
    names = list(servers)
    for round_no in range(args.rounds):
        for scenario in args.scenarios.split(","):
            order = names if round_no % 2 == 0 else names[::-1]  # alternate who goes first
            for name in order:
                command, cwd = servers[name]
                rates = run_once(command, cwd, bench, scenario, msg_size=args.msg_size)
                print(
                    json.dumps({"round": round_no, "scenario": scenario, "server": name, **rates}),
                    flush=True,
                )
                for key, value in rates.items():
                    results.setdefault((scenario, name, key), []).append(value)
    print(
        "\n| scenario | rate | "
        + " | ".join(f"{n} median" for n in names)
        + " | head/go"
        + (" | head/base" if "base" in servers else "")
        + " |"
    )
    print("|---" * (3 + len(names) + ("base" in servers)) + "|")
    for scenario in args.scenarios.split(","):
        for key in ("pub", "sub"):
            medians = {n: statistics.median(results.get((scenario, n, key), [0])) for n in names}
            if not medians["go"]:
                continue
            row = [scenario, key, *(f"{medians[n]:.0f}" for n in names)]
            row.append(f"{medians['head'] / medians['go']:.2f}")
            if "base" in servers and medians["base"]:
                row.append(f"{medians['head'] / medians['base']:.2f}")
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
