"""Three-node clusters side by side: stanpkg's (on JetStream) and the Go reference's (its
own Raft), started with the same Go flags on this host, loaded by the same Go
``stan-bench`` through a follower's URL, alternating run by run.

    STANPKG_REFERENCE_DIR=/tmp/goref python bench/cluster/cluster_bench.py --rounds 3

``--subscribers 0`` loads publishing only: the difference to a run with one subscriber is
what delivering costs each process.

Prints one JSON line per run, then medians and the ratio stanpkg / Go. The reference is
built with ../shared/reference/build.sh (see bench/side_by_side.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = "import sys; from stanpkg.cli import main; sys.exit(main())"
PACK_BYTES_HELP = "stanpkg's cluster.pack_bytes, e.g. 128KB (default: its default, no packs)"
FLAG_HELP = "one more flag of stanpkg's nodes, e.g. --stanpkg-flag=--cluster_channel_streams=4"
sys.path.insert(0, str(ROOT / "bench"))
from processes import free_port, stop_server, tree_cpu  # noqa: E402 - shared by the bench scripts
from side_by_side import parse_rates  # noqa: E402 - a sibling script


def start_cluster(
    command: list[str], workdir: Path
) -> tuple[list[subprocess.Popen[bytes]], list[int], str]:
    """The processes, the client ports of the two followers and the serving node's ID."""
    routes = {name: free_port() for name in "abc"}
    ports = {name: free_port() for name in "abc"}
    procs = []
    for name in "abc":
        others = [n for n in "abc" if n != name]
        argv = [
            *command, "-a", "127.0.0.1", "-p", str(ports[name]), "-cid", "bench",
            "-cluster", f"nats://127.0.0.1:{routes[name]}",
            "-routes", ",".join(f"nats://127.0.0.1:{routes[o]}" for o in others),
            "-clustered", "-cluster_node_id", name, "-cluster_peers", ",".join(others),
            "-store", "file", "-dir", f"{name}/store", "-cluster_log_path", f"{name}/raft",
        ]  # fmt: skip
        log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(subprocess.Popen(argv, cwd=workdir, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        logs = [(workdir / f"{n}.log").read_bytes() for n in "abc"]
        if any(b"Streaming Server is ready" in text for text in logs):
            leader = next(i for i, text in enumerate(logs) if b"Streaming Server is ready" in text)
            follower_ports = [ports[n] for i, n in enumerate("abc") if i != leader]
            return procs, follower_ports, "abc"[leader]
        time.sleep(0.2)
    stop(procs)
    raise RuntimeError(f"no leader in 90 s: see {workdir}")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        stop_server(proc)


def channel_leader(port: int) -> str:
    """The JetStream server leading the channel's shared stream (stanpkg only; "" for
    Go)."""
    import asyncio

    import nats

    from stanpkg.stores.jetstream.layout import (
        DEFAULT_CHANNEL_STREAMS,
        channel_stream_index,
        shared_stream_name,
    )

    stream = shared_stream_name("bench", channel_stream_index("foo", DEFAULT_CHANNEL_STREAMS))

    async def ask() -> str:
        nc = await nats.connect(f"nats://127.0.0.1:{port}")
        try:
            info = await nc.jetstream().stream_info(stream)
            return str(info.cluster.leader if info.cluster else "")
        finally:
            await nc.close()

    try:
        return asyncio.run(ask())
    except Exception:  # the Go cluster has no JetStream
        return ""


def run_once(
    command: list[str], bench: Path, count: int, mpa: int, subscribers: int = 1
) -> dict[str, float | str]:
    """The client's rates, where the channel is led, and the CPU each kind of process used
    during the load, in microseconds per message."""
    workdir = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    procs, followers, serving = start_cluster(command, workdir)
    try:
        time.sleep(2)  # let the followers settle
        servers_before = tree_cpu([proc.pid for proc in procs])
        client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            [str(bench), "-s", f"nats://127.0.0.1:{followers[0]}", "-c", "bench", "-np", "1",
             "-ns", str(subscribers), "-n", str(count), "-ms", "128", "-mpa", str(mpa), "foo"],
            capture_output=True, text=True, timeout=900, check=False,
        ).stdout  # fmt: skip
        client_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # stan-bench, reaped
        servers_after = tree_cpu([proc.pid for proc in procs])
        # Where the channel's stream is led decides a route hop per write: recorded.
        leader = channel_leader(followers[0])
    finally:
        stop(procs)
        shutil.rmtree(workdir, ignore_errors=True)
    placement = {"serving": serving, "stream_leader": leader} if leader else {}
    per_message = 1e6 / count
    client = client_after.ru_utime + client_after.ru_stime
    client -= client_before.ru_utime + client_before.ru_stime
    cpu = {f"cpu_us_{kind}": round((servers_after[kind] - servers_before[kind]) * per_message, 2)
           for kind in servers_after}  # fmt: skip
    cpu["cpu_us_client"] = round(client * per_message, 2)
    return {**parse_rates(out), **placement, **cpu}


def servers(
    build: str = "", pack_bytes: str = "", flags: list[str] | None = None
) -> tuple[Path, dict[str, list[str]]] | None:
    """The reference's directory and the commands of both servers (None, with a hint,
    when STANPKG_REFERENCE_DIR does not hold the reference's binaries); ``build``: a
    directory holding another build of the stanpkg package (a compiled one);
    ``pack_bytes``: stanpkg's ``cluster.pack_bytes`` (its default when empty); ``flags``:
    more flags of stanpkg's nodes."""
    reference = Path(os.environ.get("STANPKG_REFERENCE_DIR", "/nonexistent"))
    if not (reference / "stanbench").exists():
        print("set STANPKG_REFERENCE_DIR (see bench/side_by_side.py)", file=sys.stderr)
        return None
    return reference, {
        "stanpkg": [
            str(ROOT / ".venv/bin/python"),
            "-c",
            f"import sys; sys.path.insert(0, {build!r}); {RUN}" if build else RUN,
            "run",
            *(["--cluster_pack_bytes", pack_bytes] if pack_bytes else []),
            *(flags or []),
        ],
        "go": [str(reference / "nats-streaming-server")],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", "--count", type=int, default=50000)
    parser.add_argument("--mpa", type=int, default=1000, help="max publishes in flight")
    parser.add_argument(
        "--subscribers", type=int, default=1, help="stan-bench's -ns (0: what publishing costs)"
    )
    parser.add_argument("--build", default="", help="a directory with a stanpkg build")
    parser.add_argument("--pack-bytes", default="", help=PACK_BYTES_HELP)
    parser.add_argument("--stanpkg-flag", action="append", default=[], help=FLAG_HELP)
    args = parser.parse_args()
    found = servers(args.build, args.pack_bytes, args.stanpkg_flag)
    if found is None:
        return 2
    reference, servers_ = found
    results: dict[tuple[str, str], list[float]] = {}
    for round_no in range(args.rounds):
        names = list(servers_) if round_no % 2 == 0 else list(servers_)[::-1]
        for name in names:
            rates = run_once(
                servers_[name], reference / "stanbench", args.count, args.mpa, args.subscribers
            )
            print(json.dumps({"round": round_no, "server": name, **rates}), flush=True)
            for key, value in rates.items():
                if isinstance(value, float):
                    results.setdefault((name, key), []).append(value)
    for key in ("pub", "sub"):
        mine = statistics.median(results.get(("stanpkg", key), [0]))
        theirs = statistics.median(results.get(("go", key), [0]))
        ratio = mine / theirs if theirs else 0.0
        print(f"{key}: stanpkg {mine:.0f} msgs/s, Go {theirs:.0f} msgs/s, ratio {ratio:.2f}")
    for name in servers_:
        cpu = {
            key.removeprefix("cpu_us_"): statistics.median(values)
            for (server, key), values in results.items()
            if server == name and key.startswith("cpu_us_")
        }
        shown = ", ".join(f"{kind} {value:.1f}" for kind, value in cpu.items())
        print(f"CPU per message, {name}, median us: {shown} (total {sum(cpu.values()):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
