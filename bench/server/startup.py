"""Start and stop, side by side with the Go reference, as client suites use the server.

    export STANPKG_REFERENCE_DIR=/tmp/goref
    .venv/bin/python bench/server/startup.py                  # 20 starts of each side and store
    .venv/bin/python bench/server/startup.py --starts 5 --stores memory   # a trial

Each start execs the server (a fresh port, ``-cid bench``), polls its client port every
millisecond and then runs the Go ``stan-pub`` until one publish is acknowledged (a
failed one, refused or unanswered, is run again at once): **start** is the time from the
exec to that acknowledgement, ``stan-pub``'s own exec included on both sides. Then a
plain NATS client connection is opened, SIGTERM sent, and **close** is the time until
the server closed that connection, **exit** the time until the process is gone.

``--stores file`` runs the same on a FILE store holding a few channels (written once
before the first start, copied afresh for every start). The sides are those of
``side_by_side.py``: the Go reference and this checkout (``head``), plus ``base`` and
``installed`` when ``STANPKG_BASELINE_DIR`` / ``STANPKG_INSTALLED`` are set; they
alternate start by start. Prints min / median / max of each figure and the ratio of
the medians to the Go server's; writes nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
from processes import free_port, stop_server  # noqa: E402 - shared by the bench scripts
from side_by_side import BUILD_HINT, Side, installed_sides, sides  # noqa: E402

CHANNELS = 5  # in the FILE store every start recovers
FIGURES = ("start", "close", "exit")
_TIMEOUT = 30.0


def _wait_for_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.001)
    raise RuntimeError(f"port {port} never accepted")


def _publish_until_acked(stanpub: Path, port: int, deadline: float) -> int:
    """Run stan-pub until it exits 0; how many runs it took."""
    url = f"nats://127.0.0.1:{port}"
    runs = 0
    while time.monotonic() < deadline:
        runs += 1
        done = subprocess.run(
            [str(stanpub), "-s", url, "-c", "bench", "startup", "hello"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_TIMEOUT,
            check=False,
        )
        if done.returncode == 0:
            return runs
    raise RuntimeError("no publish acknowledged")


def _nats_client(port: int) -> socket.socket:
    """A NATS client connection, handshake done: INFO read, CONNECT and PING answered."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=_TIMEOUT)
    sock.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    seen = b""
    while b"PONG" not in seen:
        data = sock.recv(4096)
        if not data:
            raise RuntimeError("closed during the handshake")
        seen += data
    return sock


def _closed(sock: socket.socket) -> None:
    """Returns once the server closed ``sock``."""
    while sock.recv(65536):
        pass


def one_start(side: Side, stanpub: Path, store: Path | None) -> dict[str, float]:
    port = free_port()
    argv = [*side.command, "-a", "127.0.0.1", "-p", str(port), "-cid", "bench"]
    if store is not None:
        argv += ["-st", "file", "-dir", str(store)]
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=side.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = started + _TIMEOUT
        _wait_for_port(port, deadline)
        runs = _publish_until_acked(stanpub, port, deadline)
        acked = time.monotonic()
        client = _nats_client(port)
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _closed(client)
        closed = time.monotonic()
        client.close()
        proc.wait(_TIMEOUT)
        gone = time.monotonic()
    finally:
        stop_server(proc)
    return {
        "start": (acked - started) * 1000,
        "close": (closed - stopping) * 1000,
        "exit": (gone - stopping) * 1000,
        "runs": runs,
    }


def fill_store(side: Side, stanpub: Path, store: Path) -> None:
    """A FILE store with CHANNELS channels of one message each, written by ``side``."""
    port = free_port()
    argv = [*side.command, "-a", "127.0.0.1", "-p", str(port), "-cid", "bench"]
    proc = subprocess.Popen(
        [*argv, "-st", "file", "-dir", str(store)],
        cwd=side.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, time.monotonic() + _TIMEOUT)
        url = f"nats://127.0.0.1:{port}"
        for n in range(CHANNELS):
            _publish_until_acked_to(stanpub, url, f"channel{n}")
    finally:
        stop_server(proc)


def _publish_until_acked_to(stanpub: Path, url: str, channel: str) -> None:
    for _ in range(200):
        done = subprocess.run(
            [str(stanpub), "-s", url, "-c", "bench", channel, "kept"],
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
        if done.returncode == 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"could not publish to {channel}")


def summary(results: dict[str, dict[str, list[float]]]) -> list[str]:
    """min / median / max per side and figure, and each side's median ÷ Go's."""
    lines = [f"{'side':<10} {'figure':<6} {'min':>8} {'median':>8} {'max':>8}  {'÷ go':>6}"]
    go = results.get("go", {})
    for name, figures in results.items():
        for figure in FIGURES:
            values = figures.get(figure, [])
            if not values:
                continue
            median = statistics.median(values)
            base = statistics.median(go[figure]) if go.get(figure) else 0.0
            ratio = f"{median / base:6.2f}" if base else "      "
            lines.append(
                f"{name:<10} {figure:<6} {min(values):8.1f} {median:8.1f} "
                f"{max(values):8.1f}  {ratio}"
            )
    return lines


def run(store_kind: str, all_sides: list[Side], stanpub: Path, starts: int) -> None:
    results: dict[str, dict[str, list[float]]] = {
        s.name: {f: [] for f in FIGURES} for s in all_sides
    }
    with tempfile.TemporaryDirectory(prefix="stanpkg-startup-") as tmp:
        filled: dict[str, Path] = {}
        if store_kind == "file":
            for side in all_sides:
                filled[side.name] = Path(tmp, f"{side.name}-filled")
                fill_store(side, stanpub, filled[side.name])
        for n in range(starts):
            for side in all_sides:  # alternating: a drift of the machine hits every side
                store = None
                if store_kind == "file":
                    store = Path(tmp, f"{side.name}-{n}")
                    shutil.copytree(filled[side.name], store)
                figures = one_start(side, stanpub, store)
                for figure in FIGURES:
                    results[side.name][figure].append(figures[figure])
                print(f"{store_kind} {side.name:<8} start {n + 1:>2}: " + ", ".join(
                    f"{k} {v:.1f}" + ("" if k == "runs" else " ms") for k, v in figures.items()
                ), flush=True)  # fmt: skip
                if store is not None:
                    shutil.rmtree(store, ignore_errors=True)
    print(f"\n{store_kind} store, {starts} starts per side (ms; median ÷ the Go server's):")
    print("\n".join(summary(results)) + "\n", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=20, help="starts of each side (20)")
    parser.add_argument("--stores", default="memory,file", help="memory,file (both)")
    args = parser.parse_args()
    reference = Path(os.environ.get("STANPKG_REFERENCE_DIR", "/nonexistent"))
    stanpub = reference / "stanpub"
    if not all((reference / b).is_file() for b in ("nats-streaming-server", "stanpub")):
        print(BUILD_HINT, file=sys.stderr)
        return 2
    baseline = os.environ.get("STANPKG_BASELINE_DIR")
    installed = installed_sides(os.environ.get("STANPKG_INSTALLED", ""))
    all_sides = sides(reference, Path(baseline) if baseline else None, installed=installed)
    for kind in args.stores.split(","):
        run(kind, all_sides, stanpub, args.starts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
