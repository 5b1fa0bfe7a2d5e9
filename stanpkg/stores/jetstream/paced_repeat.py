"""Background work of the clustered store repeated on a cost-scaled interval (the
standby's readings of the cluster's state, the serving node's leader sweeps).

A pass that takes t seconds waits max(interval, cost_factor * t) before the next, so a
large cluster is not read back to back. A run of failing passes (an election takes
seconds) is logged once when it starts, and optionally once when it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from stanpkg.stores.base import StoreLog
from stanpkg.stores.jetstream.connection import raise_if_cancelled

__all__ = ["repeat"]


async def repeat(
    work: Callable[[], Awaitable[object]],
    *,
    interval: float,
    cost_factor: float,
    log: StoreLog,
    failed: Callable[[Exception], str],
    recovered: str = "",
    errors: tuple[type[Exception], ...] = (Exception,),
) -> None:
    """Run ``work`` until cancelled; ``failed(exc)`` is the warning for a run of
    failures, ``recovered`` the notice at its end ("" for none)."""
    loop = asyncio.get_running_loop()
    failing = False
    while True:
        began = loop.time()
        try:
            await work()
        except errors as exc:
            raise_if_cancelled()
            if not failing:
                log.warn(failed(exc))
            failing = True
        else:
            if failing and recovered:
                log.notice(recovered)
            failing = False
        await asyncio.sleep(max(interval, cost_factor * (loop.time() - began)))
