"""Periodic progress lines for ``stanpkg export`` when no one watches a terminal.

On a terminal Spark draws its console progress bar. Under systemd, cron or CI (stderr a
pipe or a file) that bar is off, and a long export would print nothing between its first
line and its summary: a thread prints a line every few seconds instead, from what the
driver knows: the messages read by finished slices (the source's accumulators) and the
slices done (Spark's status tracker).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["DEFAULT_INTERVAL", "PeriodicProgress", "slices_done"]

DEFAULT_INTERVAL = 5.0  # seconds between lines


def slices_done(context: SparkContext | None) -> tuple[int, int]:
    """(tasks completed, tasks) of the active stages: one task per slice read."""
    if context is None:
        return 0, 0
    tracker = context.statusTracker()
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return done, total


class PeriodicProgress:
    """``with PeriodicProgress(emit, describe, interval):`` calls ``emit(describe())``
    every ``interval`` seconds until the block ends (nothing when ``interval`` <= 0)."""

    def __init__(
        self, emit: Callable[[str], None], describe: Callable[[], str], interval: float
    ) -> None:
        self._emit = emit
        self._describe = describe
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="export-progress", daemon=True)
        self.started = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                line = self._describe()
            except Exception:  # a status read racing the job's end: skip this line
                continue
            self._emit(f"{line}, {time.monotonic() - self.started:.0f}s")

    def __enter__(self) -> PeriodicProgress:
        if self._interval > 0:
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
