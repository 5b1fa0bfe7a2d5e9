"""CPU time and resident memory of a server process and its descendants, from /proc.

stanpkg's server is a Python process plus the nats-server child it starts; the Go
reference is one process with NATS embedded. Each process is labelled ``server`` (the
one started) or by its command name (``nats-server``)."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """Fields of /proc/<pid>/stat from the third (state) on: the command name may hold
    spaces and parentheses, so split after its last ')'."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (its own threads, not its children)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0  # a zombie has no VmRSS line


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(_stat(int(entry))[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def usage(pid: int) -> dict[str, tuple[float, float]]:
    """label -> (CPU seconds, RSS MiB) for the process and each descendant (summed by
    label when several share a name)."""
    found: dict[str, tuple[float, float]] = {"server": (cpu_seconds(pid), rss_mb(pid))}
    for child in descendants(pid):
        try:
            label, cpu, rss = comm(child), cpu_seconds(child), rss_mb(child)
        except OSError:
            continue
        old_cpu, old_rss = found.get(label, (0.0, 0.0))
        found[label] = (old_cpu + cpu, old_rss + rss)
    return found


def cpu_delta(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """CPU seconds each labelled process spent between two readings of usage()."""
    return {
        label: round(cpu - before.get(label, (0.0, 0.0))[0], 3) for label, (cpu, _) in after.items()
    }
