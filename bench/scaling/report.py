"""From the runs to summary.md and scaling.png: medians of the summed rates, ratios to Go
on the same cores, CPU µs per message of each process, and a projection to more cores.

The projection rests on CPU per message only: a run that is CPU-bound on N cores moves at
most N ÷ (CPU seconds per message of every process on the host), and one stanpkg process,
being one Python thread, at most 1 ÷ (its own CPU seconds per message). It assumes the CPU
per message measured here stays the same on more cores (no new contention) and that the
channels split evenly between the processes."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Run = dict[str, Any]
REFERENCE = "go"
RATE = "rate"  # msgs of all instances ÷ wall time
PROJECTED_CORES = (4, 8)


@dataclass(frozen=True)
class CpuPerMsg:
    """Median CPU µs per message: one stanpkg process (over the messages of its own
    channels) or the Go server, nats-server (stanpkg only), stan-bench (all instances)."""

    server_process: float
    nats: float
    bench: float
    processes: int

    @property
    def host_without_clients(self) -> float:
        return self.server_process + self.nats  # per message, every server process together

    def rate(self, cores: int, *, with_clients: bool) -> float:
        """msgs/s on ``cores`` cores if CPU is the only limit (see the module's docstring)."""
        per_msg = self.host_without_clients + (self.bench if with_clients else 0.0)
        limit = cores / per_msg
        if self.processes and cores > self.processes:
            # each stanpkg process is one thread: beyond K cores only NATS and clients gain
            limit = min(limit, self.processes / self.server_process)
        return limit * 1e6


def ok_runs(runs: Sequence[Run], side: str, cores: int | None = None) -> list[Run]:
    return [
        r
        for r in runs
        if r["side"] == side and "error" not in r and (cores is None or r["cores"] == cores)
    ]


def cpu_per_msg(runs: Sequence[Run], side: str, cores: int) -> CpuPerMsg | None:
    found = ok_runs(runs, side, cores)
    if not found:
        return None
    per_process, nats, bench = [], [], []
    for run in found:
        msgs = run["msgs"]
        servers = {k: v for k, v in run["cpu_s"].items() if k != "nats-server"}
        # even split assumed (C a multiple of K), so each process served msgs ÷ K
        served = msgs / len(servers)
        per_process.append(statistics.mean(servers.values()) * 1e6 / served)
        nats.append(run["cpu_s"].get("nats-server", 0.0) * 1e6 / msgs)
        bench.append(run["bench_cpu_s"] * 1e6 / msgs)
    processes = 0 if side == REFERENCE else found[0]["processes"]
    return CpuPerMsg(
        statistics.median(per_process),
        statistics.median(nats),
        statistics.median(bench),
        processes,
    )


def busy(runs: Sequence[Run], side: str, cores: int) -> tuple[float, float]:
    """Medians of (the busiest server process's CPU ÷ wall, all CPU ÷ (wall × cores))."""
    process, host = [], []
    for run in ok_runs(runs, side, cores):
        servers = [v for k, v in run["cpu_s"].items() if k != "nats-server"]
        process.append(max(servers) / run["wall_s"])
        everything = sum(run["cpu_s"].values()) + run["bench_cpu_s"]
        host.append(everything / (run["wall_s"] * cores))
    return statistics.median(process), statistics.median(host)


def median_rate(runs: Sequence[Run], side: str, cores: int, metric: str) -> float | None:
    values = [r[metric] for r in ok_runs(runs, side, cores)]
    return statistics.median(values) if values else None


def _k(value: float | None) -> str:
    return "–" if value is None else f"{value / 1000:.1f}k"


def _ratio(value: float | None, reference: float | None) -> str:
    return f"{value / reference:.2f}" if value and reference else "–"


def _spread(runs: Sequence[Run], side: str, cores: int, metric: str) -> str:
    values = [r[metric] for r in ok_runs(runs, side, cores)]
    if not values:
        return "–"
    return f"**{_k(statistics.median(values))}** ({_k(min(values))}–{_k(max(values))})"


def sides_of(runs: Sequence[Run]) -> list[str]:
    return list(dict.fromkeys(r["side"] for r in runs))


def cores_of(runs: Sequence[Run]) -> list[int]:
    return sorted({r["cores"] for r in runs})


def measured_table(runs: Sequence[Run]) -> list[str]:
    """msgs/s = messages of all instances ÷ the load's wall time; stan-bench's own rates,
    summed over the instances, beside it (they read high: see run.py)."""
    lines = [
        "| cores | server | processes | msgs/s (all channels), median (min–max) | ÷ Go "
        "| stan-bench's rates summed, published / delivered (medians) |",
        "|---|---|---|---|---|---|",
    ]
    for cores in cores_of(runs):
        go = median_rate(runs, REFERENCE, cores, RATE)
        for side in sides_of(runs):
            found = ok_runs(runs, side, cores)
            processes = (
                "1 (Go)" if side == REFERENCE else str(found[0]["processes"] if found else "–")
            )
            rate = median_rate(runs, side, cores, RATE)
            pub, sub = (median_rate(runs, side, cores, m) for m in ("pub", "sub"))
            cells = [str(cores), side, processes, _spread(runs, side, cores, RATE)]
            cells += [_ratio(rate, go), f"{_k(pub)} / {_k(sub)}"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def gain_table(runs: Sequence[Run]) -> list[str]:
    cores = cores_of(runs)
    if len(cores) < 2:
        return []
    lines = [
        f"Gain from {cores[0]} to {cores[-1]} cores (ratio of the msgs/s medians):",
        "",
        "| server | "
        + " | ".join(f"{n} core(s)" for n in cores)
        + f" | {cores[-1]} ÷ {cores[0]} |",
        "|---" * (len(cores) + 2) + "|",
    ]
    for side in sides_of(runs):
        medians = [median_rate(runs, side, n, RATE) for n in cores]
        cells = [side, *(_k(m) for m in medians), _ratio(medians[-1], medians[0])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_table(runs: Sequence[Run]) -> list[str]:
    lines = [
        "CPU µs per message (utime + stime from /proc, medians; a stanpkg process over the "
        "messages of its own channels), and how busy the processes were: a server process's "
        "CPU seconds ÷ wall time (1.0 = one core all the time; the busiest process), every "
        "process's ÷ (wall × cores) for the host (what is missing went to waits or to other "
        "jobs on the shared machine):",
        "",
        "| cores | server | one server process | nats-server | server host total "
        "| stan-bench (all) | busiest server process | host |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cores in cores_of(runs):
        for side in sides_of(runs):
            cpu = cpu_per_msg(runs, side, cores)
            if cpu is None:
                continue
            nats = "(embedded)" if side == REFERENCE else f"{cpu.nats:.1f}"
            cells = [str(cores), side, f"{cpu.server_process:.1f}", nats]
            cells += [f"{cpu.host_without_clients:.1f}", f"{cpu.bench:.1f}"]
            cells += [f"{value:.2f}" for value in busy(runs, side, cores)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def projection(runs: Sequence[Run]) -> tuple[list[str], dict[str, CpuPerMsg]]:
    """The estimate for more cores from the CPU per message at the most cores measured:
    stanpkg with K = cores processes, stanpkg with one, and Go."""
    base = cores_of(runs)[-1]
    cpu = {s: c for s in sides_of(runs) if (c := cpu_per_msg(runs, s, base)) is not None}
    if REFERENCE not in cpu:
        return [], cpu
    partitioned = max((s for s in cpu if s != REFERENCE), key=lambda s: cpu[s].processes)
    lines = [
        f"Projection (an estimate, not a measurement) from the CPU per message at {base} "
        f"core(s). `{partitioned}` stands for stanpkg with one process per core (K = cores, "
        "channels split evenly; per-process cost as measured with "
        f"{cpu[partitioned].processes} processes); a single stanpkg process cannot pass "
        "1 ÷ its own CPU per message. `clients elsewhere` leaves out stan-bench's CPU "
        "(a server host); `clients on the host` keeps it (the setting measured above).",
        "",
        "| cores | stanpkg, K = cores, clients elsewhere | Go, clients elsewhere | ratio "
        "| stanpkg×1, clients elsewhere | stanpkg, K = cores, clients on the host "
        "| Go, clients on the host | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    single = next((s for s in cpu if cpu[s].processes == 1), None)
    for cores in (*cores_of(runs), *PROJECTED_CORES):
        scaled = _per_core(cpu[partitioned], cores)
        far, far_go = (
            scaled.rate(cores, with_clients=False),
            cpu[REFERENCE].rate(cores, with_clients=False),
        )
        near, near_go = (
            scaled.rate(cores, with_clients=True),
            cpu[REFERENCE].rate(cores, with_clients=True),
        )
        one = _k(cpu[single].rate(cores, with_clients=False)) if single else "–"
        cells = [str(cores), _k(far), _k(far_go), _ratio(far, far_go), one]
        cells += [_k(near), _k(near_go), _ratio(near, near_go)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines, cpu


def _per_core(cpu: CpuPerMsg, cores: int) -> CpuPerMsg:
    """The partitioned side with K = cores processes, each at the measured per-process cost."""
    return CpuPerMsg(cpu.server_process, cpu.nats, cpu.bench, cores)


def write_report(out_dir: Path, runs: Sequence[Run], title: str) -> None:
    errors = [r for r in runs if "error" in r]
    parts = [f"# stanpkg on more cores: {title}", "", *measured_table(runs), ""]
    if errors:
        parts += [f"{len(errors)} run(s) failed: " + "; ".join(r["error"][:120] for r in errors)]
        parts.append("")
    parts += [*gain_table(runs), "", *cpu_table(runs), ""]
    projected, cpu = projection(runs)
    if projected:
        parts += [*projected, ""]
    text = "\n".join(parts)
    (out_dir / "summary.md").write_text(text)
    print("\n" + text)
    if cpu and REFERENCE in cpu:
        from scaling.chart import draw

        draw(runs, cpu, title, out_dir / "scaling.png")
