"""bench/side_by_side.py's parts that need no reference server: stan-bench's output, the
summary figures, /proc readings of real processes, py-spy's collapsed stacks, and the
message when the reference is missing. One end-to-end run when the reference is built."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench.bench_path import ROOT, bench_on_path, run_bench_script

with bench_on_path():
    from side_by_side_parts import procstat
    from side_by_side_parts.rates import parse_rates
    from side_by_side_parts.scenarios import SCENARIOS
    from side_by_side_parts.summary import compare, cpu_us_per_msg, markdown, scaling_markdown

# stan-bench -np 2 -ns 2, then -ns 0 -sync, as the reference's client prints them
PUBSUB_OUTPUT = """\
Starting benchmark [msgs=2000, msgsize=128, pubs=2, subs=2]
NATS Streaming Pub/Sub stats: 86,900 msgs/sec ~ 10.61 MB/sec
 Pub stats: 28,966 msgs/sec ~ 3.54 MB/sec
  [1] 19,264 msgs/sec ~ 2.35 MB/sec (1000 msgs)
  [2] 14,483 msgs/sec ~ 1.77 MB/sec (1000 msgs)
  min 14,483 | avg 16,873 | max 19,264 | stddev 2,390 msgs
 Sub stats: 61,247 msgs/sec ~ 7.48 MB/sec
  [1] 31,448 msgs/sec ~ 3.84 MB/sec (2000 msgs)
  min 30,623 | avg 31,035 | max 31,448 | stddev 412 msgs
"""
SYNC_OUTPUT = """\
Starting benchmark [msgs=200, msgsize=128, pubs=1, subs=0]
Pub stats: 3,914 msgs/sec ~ 489.28 KB/sec
"""


def test_rates_are_the_aggregate_lines() -> None:
    assert parse_rates(PUBSUB_OUTPUT) == {"pub": 28966.0, "sub": 61247.0}
    assert parse_rates(SYNC_OUTPUT) == {"pub": 3914.0}
    assert parse_rates("nats: no servers available for connection\n") == {}


def _run(rnd: int, side: str, pub: float, **extra: object) -> dict[str, object]:
    run = {"round": rnd, "scenario": "mem_async", "side": side, "cores": 2, "msgs": 1000}
    return run | {"pub": pub, "sub": pub / 2} | extra


def test_ratio_of_medians_and_whiskers_from_rounds_paired() -> None:
    runs = [
        _run(0, "go", 100.0),
        _run(0, "head", 50.0),
        _run(1, "go", 200.0),
        _run(1, "head", 60.0),
        _run(2, "go", 150.0),
        _run(2, "head", 90.0),
    ]
    row = compare(runs, "mem_async", "pub")
    assert row is not None
    assert (row.sides["go"].low, row.sides["go"].median, row.sides["go"].high) == (100, 150, 200)
    assert row.ratios["head"].median == pytest.approx(60 / 150)
    # per round: 0.5, 0.3, 0.6
    assert row.ratios["head"].low == pytest.approx(0.3)
    assert row.ratios["head"].high == pytest.approx(0.6)


def test_failed_runs_are_left_out_and_no_reference_gives_no_row() -> None:
    failed = {"round": 1, "scenario": "mem_async", "side": "head", "cores": 2, "error": "x"}
    runs = [_run(0, "go", 100.0), _run(0, "head", 50.0), failed]
    row = compare(runs, "mem_async", "pub")
    assert row is not None and row.ratios["head"].median == 0.5
    failed_rss = {"round": 0, "scenario": "rss_1m", "side": "head", "cores": 2, "error": "x"}
    assert "**0.50**" in markdown([*runs, failed_rss], ["mem_async", "rss_1m"], ["go", "head"])
    assert compare([_run(0, "head", 50.0)], "mem_async", "pub") is None
    assert compare(runs, "fanout", "pub") is None


def test_rss_is_the_sum_of_the_server_processes() -> None:
    runs = [
        {"round": 0, "scenario": "rss_1m", "side": "go", "cores": 2, "msgs": 10},
        {"round": 0, "scenario": "rss_1m", "side": "head", "cores": 2, "msgs": 10},
    ]
    runs[0]["rss_mb"] = {"server": 500.0, "total": 500.0}
    runs[1]["rss_mb"] = {"server": 150.0, "nats-server": 50.0, "total": 200.0}
    row = compare(runs, "rss_1m", "rss_mb")
    assert row is not None and row.ratios["head"].median == pytest.approx(0.4)
    text = markdown(runs, ["rss_1m"], ["go", "head"])
    assert "**0.40**" in text
    assert "head: nats-server 50 MB, server 150 MB, total 200 MB" in text


def test_cpu_per_message_counts_every_server_process_and_the_client() -> None:
    run = _run(0, "head", 1.0, cpu_s={"server": 0.02, "nats-server": 0.01}, bench_cpu_s=0.005)
    per = cpu_us_per_msg(run)
    assert per["server total"] == pytest.approx(30.0)
    assert per["nats-server"] == pytest.approx(10.0)
    assert per["stan-bench"] == pytest.approx(5.0)


def test_scaling_table_divides_the_most_cores_by_the_fewest() -> None:
    runs = [_run(0, "go", 100.0) | {"cores": 1}, _run(0, "go", 180.0)]
    lines = scaling_markdown(runs, ["mem_async"], ["go"], [1, 2])
    assert "| mem_async | published/s | go | 100 | 180 | 1.80 |" in lines


def test_every_scenario_caps_its_count() -> None:
    for scenario in SCENARIOS.values():
        argv = scenario.bench_argv(max_msgs=500)
        assert argv[argv.index("-n") + 1] == str(min(500, scenario.msgs))
        assert argv[argv.index("-ms") + 1] == str(scenario.msg_size)
    assert SCENARIOS["rss_1m"].count(None) == 1_000_000


def _wait_for(condition: Callable[[], bool]) -> None:
    """Polls; the limit only stops a hung test, it asserts no speed."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "condition never met"
        time.sleep(0.05)


def test_proc_readings_of_a_real_process_tree() -> None:
    # a shell whose one child burns 0.3 s of CPU, then sleeps
    burn = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    child = f"{sys.executable} -c '{burn}time.sleep(60)'"
    shell = subprocess.Popen(["sh", "-c", f"{child} & wait"])
    try:
        _wait_for(lambda: bool(procstat.descendants(shell.pid)))
        found = procstat.descendants(shell.pid)
        before = procstat.usage(shell.pid)
        _wait_for(lambda: procstat.cpu_seconds(found[0]) >= 0.3)
        after = procstat.usage(shell.pid)
        name = procstat.comm(found[0])
        assert name.startswith("python")
        assert set(after) == {"server", name}  # the root, then children by command name
        assert after[name][0] >= 0.3 and after[name][1] > 0
        delta = procstat.cpu_delta(before, after)
        assert delta[name] == round(after[name][0] - before[name][0], 3)
        assert procstat.cpu_seconds(os.getpid()) > 0
    finally:
        for pid in procstat.descendants(shell.pid):
            os.kill(pid, 9)
        shell.kill()
        shell.wait()


def _profile_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_profile", ROOT / "bench" / "flamegraph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with bench_on_path():  # its own sys.path.insert is undone too
        spec.loader.exec_module(module)
    return module


def test_collapsed_stacks_give_self_and_inclusive_shares() -> None:
    parse = _profile_module().parse_collapsed
    raw = "\n".join(
        [
            "main (a.py:1);loop (a.py:5);parse (p.py:9) 6",
            "main (a.py:1);loop (a.py:5);loop (a.py:5);write (c.py:3) 3",
            "main (a.py:1) 1",
            "garbage",
        ]
    )
    self_time, inclusive, total = parse(raw)
    assert total == 10
    assert self_time.most_common(1) == [("parse (p.py:9)", 6)]
    assert inclusive["main (a.py:1)"] == 10
    assert inclusive["loop (a.py:5)"] == 9  # recursion counted once per sample


def _side_by_side(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_bench_script("side_by_side.py", *args, env=env)


def test_missing_reference_says_how_to_build_it(tmp_path: Path) -> None:
    (tmp_path / "stanbench").write_text("")  # nats-streaming-server is missing
    proc = _side_by_side("--rounds", "1", env={"STANPKG_REFERENCE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert "apt-get install golang-go" in proc.stderr
    assert "shared/reference/build.sh" in proc.stderr
    assert not (ROOT / "bench" / "results" / "runs.jsonl").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("STANPKG_REFERENCE_DIR"), reason="needs the Go reference (CI has none)"
)
def test_one_small_round_writes_runs_summary_and_chart(tmp_path: Path) -> None:
    args = ["--rounds", "1", "--max-msgs", "2000", "--scenarios", "mem_async,mem_sync"]
    proc = _side_by_side(*args, "--cores", "1", "--go-ns", "--out", str(tmp_path), env={})
    assert proc.returncode == 0, proc.stderr
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert {(r["scenario"], r["side"]) for r in runs} == {
        (s, side) for s in ("mem_async", "mem_sync") for side in ("go", "go-ns", "head")
    }
    assert all("error" not in r and r["cores"] == 1 and r["pub"] > 0 for r in runs)
    for side in ("head", "go-ns"):  # stanpkg, or the Go server, and its NATS child
        run = next(r for r in runs if r["side"] == side)
        assert set(run["cpu_s"]) == {"server", "nats-server"}
    assert "## 1 core(s)" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_is_rewritten_from_recorded_runs(tmp_path: Path) -> None:
    runs = [
        _run(0, "go", 100.0, cores=1),
        _run(0, "head", 40.0, cores=1),
        _run(0, "go", 180.0),
        _run(0, "head", 60.0),
        {"round": 0, "scenario": "rss_1m", "side": "go", "cores": 2, "msgs": 10},
        {"round": 0, "scenario": "rss_1m", "side": "head", "cores": 2, "msgs": 10},
    ]
    runs[4]["rss_mb"] = {"server": 500.0, "total": 500.0}
    runs[5]["rss_mb"] = {"server": 150.0, "nats-server": 50.0, "total": 200.0}
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    meta = {"header": "test\nrun", "scenarios": ["mem_async", "rss_1m"], "sides": ["go", "head"]}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    proc = _side_by_side("--report", str(tmp_path), env={})
    assert proc.returncode == 0, proc.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# test, run\n")
    assert "## 1 core(s)" in summary and "## 2 core(s)" in summary
    assert "| mem_async | published/s | head | 40 | 60 | 1.50 |" in summary
    assert "| rss_1m |" not in summary.split("## Scaling")[1]  # memory does not scale
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"


def test_go_on_nats_becomes_the_go_server_and_takes_its_nats_server_along(
    tmp_path: Path,
) -> None:
    """The go-ns side's wrapper: a real nats-server on the harness's port, then exec into
    the server given (a stand-in here, for the reference) with ``-ns`` pointing at it; the
    nats-server is its child and dies with it."""
    from stanpkg.transport.embedded import find_nats_server_binary
    from tests.ports import free_port

    seen = tmp_path / "argv.json"
    stand_in = tmp_path / "nats-streaming-server"
    stand_in.write_text(
        f"#!{sys.executable}\nimport json, sys, time\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\ntime.sleep(60)\n"
    )
    stand_in.chmod(0o755)
    port = free_port()
    wrapper = ROOT / "bench" / "side_by_side_parts" / "go_on_nats.py"
    argv = [sys.executable, str(wrapper), find_nats_server_binary(), str(stand_in)]
    proc = subprocess.Popen([*argv, "-a", "127.0.0.1", "-p", str(port), "-st", "memory"])
    try:
        deadline = time.monotonic() + 20
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(seen.read_text()) == ["-ns", f"nats://127.0.0.1:{port}", "-st", "memory"]
        children = procstat.descendants(proc.pid)
        assert [procstat.comm(pid) for pid in children] == ["nats-server"]
    finally:
        proc.terminate()
        proc.wait(10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{children[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{children[0]}").exists()


def test_python_floor_acknowledges_sync_publishes_and_closes() -> None:
    """The floor side pyacker-ns as the harness starts it: go_on_nats.py, a real
    nats-server, then py_acker.py on it; a STAN client connects, publishes synchronously
    (each PubAck carries its guid back) and closes."""
    import asyncio

    from stanpkg.client import StanBenchClient
    from stanpkg.transport import NatsConnection
    from stanpkg.transport.embedded import find_nats_server_binary
    from tests.ports import free_port

    port = free_port()
    wrapper = ROOT / "bench" / "side_by_side_parts" / "go_on_nats.py"
    py_acker = ROOT / "bench" / "side_by_side_parts" / "floor" / "py_acker.py"
    argv = [sys.executable, str(wrapper), find_nats_server_binary(), str(py_acker)]
    argv += ["-a", "127.0.0.1", "-p", str(port), "-cid", "bench", "-st", "file", "-dir", "x"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == "Streaming Server is ready"

        async def publish() -> int:
            nc = await NatsConnection.connect(f"nats://127.0.0.1:{port}")
            try:
                stan = await StanBenchClient.connect(nc, "bench", "floor-test")
                for n in range(50):
                    await stan.publish("foo", b"%d" % n, timeout=5)
                await stan.close()
                return stan.acked
            finally:
                await nc.close()

        assert asyncio.run(publish()) == 50
    finally:
        proc.terminate()
        proc.wait(10)
    assert proc.returncode == 0  # SIGTERM is its stop signal


def test_floor_needs_the_go_acker(tmp_path: Path) -> None:
    for binary in ("nats-streaming-server", "stanbench"):
        (tmp_path / binary).write_text("")
    proc = _side_by_side("--floor", env={"STANPKG_REFERENCE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert "bench/side_by_side_parts/floor/build_acker.sh" in proc.stderr


def test_floor_sides_run_only_on_round_trips() -> None:
    assert {n for n, s in SCENARIOS.items() if s.is_round_trip} == {"mem_sync", "file_sync"}
