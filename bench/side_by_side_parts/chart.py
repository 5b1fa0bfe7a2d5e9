"""chart.png: one bar group per workload, stanpkg ÷ Go for each metric (ratio of
medians), whiskers from the lowest to the highest ratio of runs paired by round, and the
0.8 target line; one panel per core count. matplotlib is the optional ``bench`` extra."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from side_by_side_parts.scenarios import LOWER_IS_BETTER
from side_by_side_parts.summary import REFERENCE, Comparison

TARGET = 0.8
RSS_TARGET = 0.4  # issue 16: RSS for 1M stored messages ≤ 0.4× the reference's
SIDE_COLOURS = {
    "head": "#1f77b4",
    "base": "#aaaaaa",
    "go-ns": "#2ca02c",
    "acker-ns": "#ff7f0e",
    "pyacker-ns": "#9467bd",
}
Y_MAX = 1.6  # taller bars are cut there, their value written (a floor's 3x on FILE)
METRIC_HATCH = {"pub": "", "sub": "//", "rss_mb": "xx"}


def _panel(ax: Any, rows: Sequence[Comparison], others: Sequence[str], title: str) -> None:
    scenarios = list(dict.fromkeys(row.scenario for row in rows))
    most = max((len(others) * sum(r.scenario == s for r in rows) for s in scenarios), default=1)
    width = 0.8 / most
    for group, scenario in enumerate(scenarios):
        bars = [(row, side) for row in rows if row.scenario == scenario for side in others]
        start = group - width * (len(bars) - 1) / 2
        for i, (row, side) in enumerate(bars):
            ratio = row.ratios.get(side)
            if ratio is None:
                continue
            x = start + i * width
            shown = min(ratio.median, Y_MAX)
            ax.bar(
                x,
                shown,
                width * 0.9,
                color=SIDE_COLOURS.get(side, "#8c564b"),
                hatch=METRIC_HATCH.get(row.metric, ""),
                edgecolor="black",
                linewidth=0.5,
            )
            if ratio.median <= Y_MAX:
                high = min(ratio.high, Y_MAX)
                ax.errorbar(
                    x,
                    ratio.median,
                    yerr=[[ratio.median - ratio.low], [high - ratio.median]],
                    fmt="none",
                    ecolor="black",
                    capsize=3,
                )
            if row.metric in LOWER_IS_BETTER:
                ax.hlines(RSS_TARGET, x - width / 2, x + width / 2, colors="red", linewidth=2)
            # Upright, the labels of neighbouring bars overlapped once there were 3+ sides.
            ax.annotate(
                f"{ratio.median:.2f}",
                (x, min(ratio.high, Y_MAX)),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
                va="bottom",
                rotation=90,
                fontsize=7,
            )
    ax.axhline(TARGET, color="red", linestyle="--", linewidth=1)
    right = len(scenarios) - 0.45
    ax.text(right, TARGET, f"target {TARGET} ", color="red", ha="right", va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.5)
    lower = {row.scenario for row in rows if row.metric in LOWER_IS_BETTER}
    ticks = [f"{s}\n(lower is better)" if s in lower else s for s in scenarios]
    ax.set_xticks(range(len(scenarios)), ticks, rotation=15, ha="right")
    ax.set_xlim(-0.6, len(scenarios) - 0.4)
    ax.set_ylabel("stanpkg ÷ Go")
    top = max((r.high for row in rows for r in row.ratios.values()), default=1.0)
    ax.set_ylim(0, max(1.2, min(top, Y_MAX)) * 1.25)  # room for the upright labels
    ax.set_title(title, fontsize=9)


def draw(
    title: str,
    panels: Sequence[tuple[str, Sequence[Comparison]]],
    sides: Sequence[str],
    path: Path,
) -> None:
    """One panel per (panel title, rows), stacked; the legend on the first."""
    import matplotlib

    matplotlib.use("Agg")  # no display on the bench machines
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    others = [s for s in sides if s != REFERENCE]
    most = max((len({r.scenario for r in rows}) for _, rows in panels), default=1)
    bars = max((len(rows) * len(others) for _, rows in panels), default=1)
    width = max(8.0, 1.2 * most, 0.22 * bars) + 2.0  # + the legend
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 4.2 * len(panels)), squeeze=False)
    for ax, (panel_title, rows) in zip(axes[:, 0], panels, strict=True):
        _panel(ax, rows, others, panel_title)
    legend: list[Artist] = [
        Rectangle((0, 0), 1, 1, facecolor=SIDE_COLOURS.get(s, "#8c564b"), label=f"{s} ÷ go")
        for s in others
    ]
    legend += [
        Rectangle((0, 0), 1, 1, facecolor="white", hatch=h, edgecolor="black", label=m)
        for m, h in (("published/s", ""), ("delivered/s", "//"), ("VmRSS", "xx"))
    ]
    legend.append(Line2D([], [], color="black", marker="_", label="min–max of the rounds' ratios"))
    # Beside the plot: inside, it covered the first group's labels.
    axes[0, 0].legend(handles=legend, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
