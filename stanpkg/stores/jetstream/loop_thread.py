"""An asyncio event loop on a thread of its own, for work the node's main loop must not be
able to delay (the lease's renewals, lease.py): a CPU-bound promotion, a blocking call or
a flood of requests on the main loop holds only the main loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an event loop of its own: ``start()``, ``submit()``
    coroutines to it from any thread, ``stop()``. A process that exits does not wait for
    it (daemon): what it holds goes with the process, as a killed one's would."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    @property
    def running(self) -> bool:
        """Started and not asked to stop: a submitted coroutine runs."""
        return self._thread is not None and not self._stopping

    def start(self) -> None:
        """Start the thread (once; later calls do nothing)."""
        if self._thread is not None:
            return
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(loop,), name=self.name, daemon=True)
        self._thread.start()

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                # What was still running is cancelled: its awaiters (other threads' futures)
                # learn so instead of waiting forever.
                tasks = asyncio.all_tasks(loop)
                for task in tasks:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the thread's loop; its future, to wait on from any thread."""
        loop = self._loop
        if loop is None or not self.running:
            coro.close()
            raise RuntimeError(f"{self.name} is not running")
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Call ``callback(*args)`` on the thread's loop."""
        loop = self._loop
        if loop is not None and self.running:
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(callback, *args)

    def stop(self) -> None:
        """Stop the loop (what still runs on it is cancelled); returns at once."""
        loop = self._loop
        self._stopping = True
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # closed already
                loop.call_soon_threadsafe(loop.stop)

    def join(self, timeout: float) -> None:
        """Wait (blocking) up to ``timeout`` seconds for a stopped thread to end."""
        if self._thread is not None:
            self._thread.join(timeout)
