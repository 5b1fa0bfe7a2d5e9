"""bench/scaling's parts: the channel split and the partitioning config each stanpkg
process gets (compiled by the real config compiler), the topology itself (a real
nats-server and two partitioned stanpkg processes, one client publishing to both
channels), the figures of the report, and the run against the Go reference when built."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stanpkg.plan.compile import compile_args
from tests.bench.bench_path import bench_on_path, run_bench_script
from tests.server.stan_client import StanClient

with bench_on_path():
    from scaling import report
    from scaling.topology import (
        channel_names,
        partition,
        partition_config,
        stanpkg_partitions,
    )


def test_channels_split_every_kth_and_each_config_compiles(tmp_path: Path) -> None:
    channels = channel_names(4)
    assert partition(channels, 1) == [channels]
    assert partition(channels, 2) == [["scale.0", "scale.2"], ["scale.1", "scale.3"]]
    assert partition(channel_names(3), 2) == [["scale.0", "scale.2"], ["scale.1"]]
    conf = tmp_path / "p.conf"
    conf.write_text(partition_config(["scale.1", "scale.3"]))
    compiled = compile_args(["-sc", str(conf), "-st", "memory"], env={})
    assert compiled.plan is not None, compiled.diagnostics
    assert compiled.plan.partitioning
    assert [c.name for c in compiled.plan.store_limits.channels] == ["scale.1", "scale.3"]


async def _publish_and_receive(url: str, channels: list[str]) -> dict[str, bytes]:
    client = await StanClient.connect(url, "bench", "scaling-test")
    try:
        subs = {name: await client.subscribe(name) for name in channels}
        for name in channels:
            await client.publish(name, name.encode())  # acked by the owning process
        return {name: (await sub.next()).data for name, sub in subs.items()}
    finally:
        await client.close()


@pytest.mark.slow
def test_two_partitioned_processes_serve_one_channel_each(tmp_path: Path) -> None:
    with stanpkg_partitions(2, 2, tmp_path) as running:
        assert sorted(running.pids) == ["nats-server", "stanpkg-0", "stanpkg-1"]
        got = asyncio.run(asyncio.wait_for(_publish_and_receive(running.url, channel_names(2)), 30))
    assert got == {"scale.0": b"scale.0", "scale.1": b"scale.1"}
    assert "partitioning: true" in (tmp_path / "partition-1.conf").read_text()


def _run(cores: int, side: str, processes: int, rate: float, **cpu: float) -> dict[str, Any]:
    """A run as runs.jsonl holds it: 100k messages in 2 s of wall time."""
    return {
        "round": 0,
        "cores": cores,
        "side": side,
        "processes": processes,
        "rate": rate,
        "pub": rate,
        "sub": rate,
        "msgs": 100_000,
        "wall_s": 2.0,
        "cpu_s": cpu,
        "bench_cpu_s": 0.5,
    }


RUNS = [
    _run(1, "go", 1, 40_000, go=1.0),
    _run(1, "stanpkg×2", 2, 20_000, **{"nats-server": 0.5, "stanpkg-0": 1.0, "stanpkg-1": 1.0}),
    _run(2, "go", 1, 60_000, go=1.0),
    _run(2, "stanpkg×2", 2, 30_000, **{"nats-server": 0.5, "stanpkg-0": 1.0, "stanpkg-1": 1.0}),
    {"round": 1, "cores": 2, "side": "go", "processes": 1, "error": "stan-bench exited"},
]


def test_cpu_per_message_counts_a_process_over_its_own_channels() -> None:
    cpu = report.cpu_per_msg(RUNS, "stanpkg×2", 2)
    assert cpu is not None
    assert cpu.server_process == pytest.approx(20.0)  # 1 s over the 50k messages it served
    assert cpu.nats == pytest.approx(5.0) and cpu.bench == pytest.approx(5.0)
    assert report.busy(RUNS, "stanpkg×2", 2) == (pytest.approx(0.5), pytest.approx(0.75))


def test_projection_is_cores_over_cpu_per_message_and_one_process_is_capped() -> None:
    partitioned = report.CpuPerMsg(server_process=20.0, nats=5.0, bench=5.0, processes=0)
    assert partitioned.rate(4, with_clients=False) == pytest.approx(4 / 25e-6)
    assert partitioned.rate(4, with_clients=True) == pytest.approx(4 / 30e-6)
    single = report.CpuPerMsg(server_process=20.0, nats=5.0, bench=5.0, processes=1)
    assert single.rate(8, with_clients=False) == pytest.approx(1 / 20e-6)  # one thread
    assert single.rate(1, with_clients=False) == pytest.approx(1 / 25e-6)


def test_report_gives_ratios_to_go_on_the_same_cores_and_leaves_failures_out(
    tmp_path: Path,
) -> None:
    report.write_report(tmp_path, RUNS, "test")
    text = (tmp_path / "summary.md").read_text()
    assert "| 1 | stanpkg×2 | 2 | **20.0k** (20.0k–20.0k) | 0.50 |" in text
    assert "| 2 | stanpkg×2 | 2 | **30.0k** (30.0k–30.0k) | 0.50 |" in text
    assert "| stanpkg×2 | 20.0k | 30.0k | 1.50 |" in text  # the gain from 1 to 2 cores
    assert "1 run(s) failed: stan-bench exited" in text
    assert "| 8 |" in text  # projected
    assert (tmp_path / "scaling.png").stat().st_size > 0


def _scaling(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_bench_script("scaling/run.py", *args, env=env)


def test_missing_reference_is_refused(tmp_path: Path) -> None:
    proc = _scaling("--rounds", "1", env={"STANPKG_REFERENCE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert "STANPKG_REFERENCE_DIR" in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("STANPKG_REFERENCE_DIR"), reason="needs the Go reference (CI has none)"
)
def test_one_small_round_on_one_core(tmp_path: Path) -> None:
    argv = ["--cores", "1", "--processes", "2", "--instances", "2", "--msgs", "2000"]
    proc = _scaling(*argv, "--rounds", "1", "--out", str(tmp_path), env={})
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [(r["side"], r["cores"]) for r in runs] == [("go", 1), ("stanpkg×2", 1)]
    assert all("error" not in r and r["rate"] > 0 for r in runs)
    assert set(runs[1]["cpu_s"]) == {"nats-server", "stanpkg-0", "stanpkg-1"}
    assert (tmp_path / "scaling.png").is_file()
