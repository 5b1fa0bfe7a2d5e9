"""Runs protocol requests one at a time, in arrival order.

Connect, subscribe, unsubscribe, close and heartbeat-expiry closes mutate shared state
and may await the store; running them through one queue keeps the reference's ordering
guarantees (an ack or publish received before a close is applied before it, because
both arrive on the same connection and acks are processed inline) without locks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stanpkg.server.log import Logger

__all__ = ["SerialExecutor"]

Job = Callable[[], Awaitable[None]]


class SerialExecutor:
    def __init__(self, log: Logger) -> None:
        self._log = log
        self._jobs: deque[Job] = deque()
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="stan-control")

    def submit(self, job: Job) -> None:
        if self._closed:
            return
        self._jobs.append(job)
        self._idle.clear()
        self._wakeup.set()

    def __len__(self) -> int:
        return len(self._jobs)

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._jobs:
                job = self._jobs.popleft()
                try:
                    await job()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # one bad request must not stop the others
                    self._log.error(f"Error processing request: {exc!r}")
            self._idle.set()

    async def drain(self) -> None:
        """Wait until every submitted job has run."""
        while self._jobs or not self._idle.is_set():
            await self._idle.wait()

    def refuse_new(self) -> None:
        """The server stops: jobs not started yet are dropped, and later ones refused;
        :meth:`drain` then waits for the running one only."""
        self._closed = True
        self._jobs.clear()

    async def close(self) -> None:
        self._closed = True
        self._jobs.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
