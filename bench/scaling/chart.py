"""scaling.png: delivered msgs/s against cores, measured (solid, min–max whiskers) for
Go and each stanpkg process count, and the CPU-per-message projection (dashed) to more
cores with the clients on the host, the setting that was measured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scaling.report import (
    PROJECTED_CORES,
    RATE,
    REFERENCE,
    CpuPerMsg,
    Run,
    cores_of,
    median_rate,
    ok_runs,
    sides_of,
)

COLOURS = {REFERENCE: "#444444"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


def draw(runs: Sequence[Run], cpu: dict[str, CpuPerMsg], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on the bench machines
    import matplotlib.pyplot as plt

    measured_cores = cores_of(runs)
    fig, ax = plt.subplots(figsize=(8, 5))
    for index, side in enumerate(sides_of(runs)):
        colour = COLOURS.get(side, PALETTE[index % len(PALETTE)])
        xs, ys, low, high = [], [], [], []
        for cores in measured_cores:
            median = median_rate(runs, side, cores, RATE)
            if median is None:
                continue
            values = [r[RATE] for r in ok_runs(runs, side, cores)]
            xs.append(cores)
            ys.append(median)
            low.append(median - min(values))
            high.append(max(values) - median)
        ax.errorbar(xs, ys, yerr=[low, high], color=colour, marker="o", capsize=3, label=side)
        if side not in cpu or not xs:
            continue
        model, label = cpu[side], None
        if model.processes > 1:  # the partitioned side grows one process per core
            model = CpuPerMsg(model.server_process, model.nats, model.bench, 0)
            label = f"{side} projected with one stanpkg process per core"
        ahead = [n for n in PROJECTED_CORES if n > xs[-1]]
        projected = [model.rate(n, with_clients=True) for n in ahead]
        # from the measured point, scaled as the model scales (the model sets the slope)
        scale = ys[-1] / model.rate(xs[-1], with_clients=True)
        ax.plot(
            [xs[-1], *ahead],
            [ys[-1], *(p * scale for p in projected)],
            color=colour,
            linestyle="--",
            marker="x",
            label=label,
        )
    ax.plot(
        [],
        [],
        color="black",
        linestyle="--",
        label="projection (dashed): CPU per message sets the slope",
    )
    ax.set_xticks(
        [*measured_cores, *PROJECTED_CORES], [str(n) for n in (*measured_cores, *PROJECTED_CORES)]
    )
    ax.set_xlabel("cores (everything pinned: servers, nats-server, stan-bench)")
    ax.set_ylabel("msgs/s, all channels (median; published = delivered)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title, fontsize=8, wrap=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
