"""From the runs (one dict per run, as runs.jsonl holds them) to the figures to quote:
min / median / max per side, the ratio of medians against the Go reference, the ratios of
the runs paired by round (the chart's whiskers), and CPU microseconds per message."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from side_by_side_parts.scenarios import SCENARIOS

Run = dict[str, Any]
REFERENCE = "go"


@dataclass(frozen=True)
class Spread:
    low: float
    median: float
    high: float

    @staticmethod
    def of(values: Sequence[float]) -> Spread:
        return Spread(min(values), statistics.median(values), max(values))


@dataclass(frozen=True)
class Comparison:
    scenario: str
    metric: str
    sides: dict[str, Spread]  # side -> its values
    ratios: dict[str, Spread]  # side -> median ÷ reference median, and per-round ratios


def metric_value(run: Run, metric: str) -> float | None:
    value = run.get("rss_mb", {}).get("total") if metric == "rss_mb" else run.get(metric)
    return float(value) if value is not None else None


def compare(runs: Iterable[Run], scenario: str, metric: str) -> Comparison | None:
    """None when the reference has no value for it (every run failed)."""
    by_side: dict[str, dict[int, float]] = {}
    for run in runs:
        value = metric_value(run, metric) if run["scenario"] == scenario else None
        if value is not None:
            by_side.setdefault(run["side"], {})[run["round"]] = value
    if not by_side.get(REFERENCE):
        return None
    reference = by_side[REFERENCE]
    sides = {side: Spread.of(list(values.values())) for side, values in by_side.items()}
    ratios = {}
    for side, values in by_side.items():
        if side == REFERENCE:
            continue
        paired = [values[r] / reference[r] for r in values if reference.get(r)]
        of_medians = sides[side].median / sides[REFERENCE].median
        ratios[side] = Spread(
            min(paired, default=of_medians), of_medians, max(paired, default=of_medians)
        )
    return Comparison(scenario, metric, sides, ratios)


def comparisons(runs: Sequence[Run], scenarios: Iterable[str]) -> list[Comparison]:
    found = []
    for name in scenarios:
        for metric in SCENARIOS[name].metrics:
            row = compare(runs, name, metric)
            if row is not None:
                found.append(row)
    return found


def cpu_us_per_msg(run: Run) -> dict[str, float]:
    """CPU µs per published message: each server process, their sum, and stan-bench."""
    msgs = run["msgs"]
    per = {label: seconds * 1e6 / msgs for label, seconds in run.get("cpu_s", {}).items()}
    per["server total"] = sum(per.values())
    per["stan-bench"] = run.get("bench_cpu_s", 0.0) * 1e6 / msgs
    return per


def _fmt(value: float, metric: str) -> str:
    if metric == "rss_mb":
        return f"{value:.0f} MB"
    return f"{value / 1000:.1f}k" if value >= 10_000 else f"{value:.0f}"


def _spread_cell(spread: Spread | None, metric: str) -> str:
    if spread is None:
        return "–"
    return " / ".join(_fmt(v, metric) for v in (spread.low, spread.median, spread.high))


def _ratio_cell(spread: Spread | None) -> str:
    if spread is None:
        return "–"
    return f"**{spread.median:.2f}** ({spread.low:.2f}–{spread.high:.2f})"


METRIC_NAMES = {"pub": "published/s", "sub": "delivered/s", "rss_mb": "VmRSS"}


def markdown(runs: Sequence[Run], scenarios: Sequence[str], sides: Sequence[str]) -> str:
    """The rates (or RSS) table, then the CPU-per-message table."""
    others = [s for s in sides if s != REFERENCE]
    head = ["workload", "metric", f"{REFERENCE} min / median / max"]
    head += [f"{s} min / median / max" for s in others]
    head += [f"{s} ÷ {REFERENCE} (by round)" for s in others]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for row in comparisons(runs, scenarios):
        cells = [SCENARIOS[row.scenario].title, METRIC_NAMES[row.metric]]
        cells += [_spread_cell(row.sides.get(s), row.metric) for s in sides]
        cells += [_ratio_cell(row.ratios.get(s)) for s in others]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *cpu_markdown(runs, scenarios, sides)]
    rss = rss_parts_markdown(runs, sides)
    return "\n".join(lines + (["", *rss] if rss else [])) + "\n"


def _median_cpu(runs: Iterable[Run], scenario: str, side: str) -> dict[str, float]:
    per_run = [
        cpu_us_per_msg(r)
        for r in runs
        if r["scenario"] == scenario and r["side"] == side and "error" not in r
    ]
    labels = {label for per in per_run for label in per}
    return {
        label: statistics.median(per.get(label, 0.0) for per in per_run) for label in sorted(labels)
    }


def cpu_markdown(runs: Sequence[Run], scenarios: Sequence[str], sides: Sequence[str]) -> list[str]:
    """Median CPU µs per published message, server side (its processes) and stan-bench."""
    lines = [
        "CPU µs per published message (medians; server = every process of the server):",
        "",
        f"| workload | side | server total | ÷ {REFERENCE} | server processes | stan-bench |",
        "|---|---|---|---|---|---|",
    ]
    for name in scenarios:
        reference = _median_cpu(runs, name, REFERENCE).get("server total")
        for side in sides:
            cpu = _median_cpu(runs, name, side)
            if not cpu:
                continue
            parts = ", ".join(
                f"{label} {value:.1f}"
                for label, value in cpu.items()
                if label not in ("server total", "stan-bench")
            )
            total, bench = cpu["server total"], cpu["stan-bench"]
            ratio = f"{total / reference:.2f}" if reference and side != REFERENCE else "–"
            lines.append(f"| {name} | {side} | {total:.1f} | {ratio} | {parts} | {bench:.1f} |")
    return lines


def rss_parts_markdown(runs: Sequence[Run], sides: Sequence[str]) -> list[str]:
    """VmRSS of each server process after the 1M publish (medians), when that ran."""
    lines = []
    for side in sides:
        parts = [
            r["rss_mb"]
            for r in runs
            if r["scenario"] == "rss_1m" and r["side"] == side and "rss_mb" in r
        ]
        if parts:
            labels = sorted({label for p in parts for label in p})
            cells = ", ".join(
                f"{label} {statistics.median(p.get(label, 0.0) for p in parts):.0f} MB"
                for label in labels
            )
            lines.append(f"- {side}: {cells}")
    return (
        ["VmRSS after publishing 1M messages, by process (medians):", "", *lines] if lines else []
    )


def scaling_markdown(
    runs: Sequence[Run], scenarios: Sequence[str], sides: Sequence[str], cores: Sequence[int]
) -> list[str]:
    """Median of each side at each core count, and how much the most cores gained over the
    fewest (the scaling curve of issue 16)."""
    head = ["workload", "metric", "side", *(f"{n} core(s)" for n in cores)]
    head.append(f"{cores[-1]} ÷ {cores[0]} cores")
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name in (n for n in scenarios if SCENARIOS[n].across_cores):
        for metric in SCENARIOS[name].metrics:
            for side in sides:
                medians = []
                for n in cores:
                    values = [
                        v
                        for r in runs
                        if r["scenario"] == name and r["side"] == side and r["cores"] == n
                        if (v := metric_value(r, metric)) is not None
                    ]
                    medians.append(statistics.median(values) if values else None)
                first, last = medians[0], medians[-1]
                gain = f"{last / first:.2f}" if first and last else "–"
                cells = [name, METRIC_NAMES[metric], side]
                cells += ["–" if m is None else _fmt(m, metric) for m in medians]
                lines.append("| " + " | ".join([*cells, gain]) + " |")
    return lines
