"""C Go ``stan-bench`` instances at once, each on its own channel with its own client-ID
prefix (1 publisher + 1 subscriber, async publishes), and what each reported."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from side_by_side_parts.rates import parse_rates

from scaling.topology import CLUSTER_ID, channel_names

BENCH_TIMEOUT = 600.0


@dataclass(frozen=True)
class Load:
    msgs: int  # -n of each instance
    msg_size: int = 128
    max_pub_acks: int = 16384


@dataclass(frozen=True)
class LoadResult:
    pub: list[float]  # msgs/s each instance published
    sub: list[float]  # msgs/s each instance's subscriber received
    wall_s: float  # first start to last exit
    bench_cpu_s: float  # every instance's utime + stime (rusage from wait4)


def _argv(bench: Path, url: str, load: Load, index: int, channel: str) -> list[str]:
    return [
        str(bench),
        "-s",
        url,
        "-c",
        CLUSTER_ID,
        "-id",
        f"scale{index}",  # client IDs must differ between instances
        "-np",
        "1",
        "-ns",
        "1",
        "-n",
        str(load.msgs),
        "-ms",
        str(load.msg_size),
        "-mpa",
        str(load.max_pub_acks),
        channel,
    ]


def _kill_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.kill()


def run_instances(bench: Path, url: str, load: Load, instances: int) -> LoadResult:
    with tempfile.TemporaryDirectory(prefix="scaling-bench-") as tmp:
        outputs = [Path(tmp) / f"{i}.out" for i in range(instances)]
        procs = []
        started = time.monotonic()
        for i, channel in enumerate(channel_names(instances)):
            with open(outputs[i], "wb") as out:
                procs.append(
                    subprocess.Popen(
                        _argv(bench, url, load, i, channel), stdout=out, stderr=subprocess.STDOUT
                    )
                )
        timer = threading.Timer(BENCH_TIMEOUT, _kill_all, (procs,))
        timer.start()
        cpu, failures = 0.0, []
        try:
            for i, proc in enumerate(procs):
                _, status, rusage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu += rusage.ru_utime + rusage.ru_stime
                if proc.returncode != 0:
                    failures.append(f"instance {i} exited with {proc.returncode}")
        finally:
            timer.cancel()
        wall = time.monotonic() - started
        texts = [path.read_text(errors="replace") for path in outputs]
    if failures:
        raise RuntimeError("; ".join(failures) + ": " + texts[0][-300:])
    rates = [parse_rates(text) for text in texts]
    missing = [i for i, r in enumerate(rates) if "pub" not in r or "sub" not in r]
    if missing:
        raise RuntimeError(f"no rates from instances {missing}: {texts[missing[0]][-300:]}")
    return LoadResult([r["pub"] for r in rates], [r["sub"] for r in rates], wall, cpu)
