"""Draw the samples of a load run (bench/results/load/NAME.jsonl) as bench/results/load/NAME.png:
the server's RSS, open files, CPU, and (soak) publish latency against time.

Needs matplotlib, which is not a stanpkg dependency: ``.venv/bin/pip install matplotlib``.
Usage: ``python bench/load/plot.py [soak] [churn] ...`` (default: every bench/results/load/*.jsonl).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

DATA = Path(__file__).resolve().parents[2] / "bench" / "results" / "load"


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()]


def plot(name: str) -> Path:
    rows = load(name)
    minutes = [r["t"] / 60 for r in rows]
    has_latency = any("lat_p99_ms" in r for r in rows)
    panels = 4 if has_latency else 3
    fig, axes = plt.subplots(panels, 1, figsize=(9, 2.2 * panels), sharex=True)
    axes[0].plot(minutes, [r["rss_mb"] for r in rows])
    axes[0].set_ylabel("RSS (MB)")
    axes[0].set_ylim(bottom=0)
    axes[1].plot(minutes, [r["open_files"] for r in rows])
    axes[1].set_ylabel("open files")
    axes[1].set_ylim(bottom=0, top=max(r["open_files"] for r in rows) * 1.5)
    axes[2].plot(minutes, [r["cpu_percent"] for r in rows], linewidth=0.6)
    axes[2].set_ylabel("server CPU (%)")
    axes[2].set_ylim(bottom=0)
    if has_latency:
        timed = [(m, r) for m, r in zip(minutes, rows, strict=True) if "lat_p99_ms" in r]
        for key, label in (("lat_p50_ms", "p50"), ("lat_p99_ms", "p99")):
            axes[3].plot([m for m, _ in timed], [r[key] for _, r in timed], label=label, lw=0.6)
        axes[3].set_yscale("log")
        axes[3].set_ylabel("publish→PubAck (ms)")
        axes[3].legend(loc="upper right")
    axes[-1].set_xlabel("minutes")
    fig.suptitle(f"stanpkg server under load: {name}")
    fig.tight_layout()
    out = DATA / f"{name}.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main() -> None:
    names = sys.argv[1:] or sorted(p.stem for p in DATA.glob("*.jsonl"))
    for name in names:
        print(plot(name))


if __name__ == "__main__":
    main()
