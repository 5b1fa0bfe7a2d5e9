"""The clustered benchmarks: without the Go reference they exit 2 with a hint, CI needs
none (their real runs need the reference and are measured by hand: bench/README.md); the
JetStream floor needs none and runs for real."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bench.bench_path import bench_on_path, run_bench_script


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("cluster/cluster_bench.py", ["--rounds", "1"]),
        ("cluster/failover_bench.py", ["--rounds", "1", "--kill", "follower"]),
        ("cluster/failover_bench.py", ["--rounds", "1", "--steady"]),
        ("cluster/latency_capacity.py", ["--rounds", "1", "--skip-capacity"]),
    ],
)
def test_without_the_reference_they_say_where_it_goes(
    script: str, args: list[str], tmp_path: Path
) -> None:
    proc = run_bench_script(script, *args, env={"STANPKG_REFERENCE_DIR": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert "STANPKG_REFERENCE_DIR" in proc.stderr


def test_the_jetstream_floor_writes_the_store_s_batches_to_a_real_cluster() -> None:
    """jetstream_floor needs no reference: three real nats-servers, the store's batches.
    Each variant of the publish ID header is taken, and the fence holds (a refused batch
    would end the run)."""
    for header in ("Stan-Guid", "Nats-Msg-Id", "none"):
        proc = run_bench_script(
            "cluster/jetstream_floor.py",
            *("-n", "3000", "--batch", "250", "--rounds", "2", "--guid-header", header),
            env={},
        )
        assert proc.returncode == 0, proc.stderr
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        assert [line["round"] for line in lines[:2]] == [0, 1]
        assert all(line["msgs_per_s"] > 0 and line["cpu_us_nats-server"] > 0 for line in lines[:2])
        assert lines[2]["guid_header"] == header and lines[2]["median_msgs_per_s"] > 0


def test_tree_cpu_counts_a_process_tree_by_kind() -> None:
    """The CPU of a process and its children, the nats-servers apart."""
    with bench_on_path():
        from processes import tree_cpu

    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    busy += "time.sleep(5)\n"  # alive when counted (a reaped child's CPU is its parent's)
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}])\n"
    parent = subprocess.Popen([sys.executable, "-c", child + "import time; time.sleep(5)"])
    try:
        deadline = time.monotonic() + 10
        while (used := tree_cpu([parent.pid]))["node"] < 0.3:
            assert time.monotonic() < deadline, used
            time.sleep(0.05)
        assert used["nats-server"] == 0.0
    finally:
        parent.kill()
        parent.wait()
