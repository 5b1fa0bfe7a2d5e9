"""The clustered benchmarks without the Go reference: exit 2 with a hint, CI needs none.
(Their real runs need the reference and are measured by hand: bench/README.md.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.bench_path import run_bench_script


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
