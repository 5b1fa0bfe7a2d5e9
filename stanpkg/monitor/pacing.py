"""Keeping big monitoring answers from stalling the server.

* :class:`Pacer`: a long walk over the server state on the event loop yields to the
  loop every few milliseconds, so publishes, acks and heartbeats keep flowing.
* :func:`release`: a big answer's objects are freed a slice at a time too (freeing
  100k objects at once is one C call, ~50 ms with the GIL held).
* :func:`gc_paused`: no cyclic garbage collection while an answer is built. A scrape of
  100k subscriptions creates a few hundred thousand short-lived tracked objects; with the
  collector on, they survive two young collections (they live for the whole scrape),
  get promoted, and soon trigger a full collection of every object of the server — over
  a second with the GIL held (bench/monitor/README.md). Paused, they are freed by
  reference counting when the answer is sent and are never promoted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Pacer", "gc_paused", "release"]

# The longest stretch a monitoring request may keep the event loop from publishes,
# acks and heartbeats.
SLICE_SECONDS = 0.005


class Pacer:
    """``await pacer.pause()`` between two units of work: yields to the event loop once
    the current slice is used up."""

    __slots__ = ("_deadline",)

    def __init__(self) -> None:
        self._deadline = time.perf_counter() + SLICE_SECONDS

    async def pause(self) -> None:
        if time.perf_counter() < self._deadline:
            return
        await asyncio.sleep(0)
        self._deadline = time.perf_counter() + SLICE_SECONDS


async def release(items: list[Any], chunk: int = 256) -> None:
    """Empty ``items`` (the last reference to what it holds), yielding between chunks."""
    pacer = Pacer()
    while items:
        del items[-chunk:]
        await pacer.pause()


class _GcPauses:
    """Nested pauses (concurrent requests): the collector is re-enabled when the last
    one ends, and only if it was enabled when the first one began."""

    depth = 0
    resume = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    if _GcPauses.depth == 0:
        _GcPauses.resume = gc.isenabled()
        gc.disable()
    _GcPauses.depth += 1
    try:
        yield
    finally:
        _GcPauses.depth -= 1
        if _GcPauses.depth == 0 and _GcPauses.resume:
            gc.enable()
