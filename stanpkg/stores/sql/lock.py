"""The fault-tolerance store lock: the single row of ``StoreLock`` (internal-protocol.md
§3.3, defaults.md §5).

The owner writes its ID and a tick that it increments every :data:`UPDATE_INTERVAL`. A
candidate that finds another owner watches the tick: if it did not move during
:data:`LOST_COUNT` intervals (each 1.5 × the interval) the lock is taken over. An owner
that cannot update the row :data:`LOST_COUNT` times in a row, or finds someone else's ID
in it, has lost the lock and must stop. A clean shutdown clears the row, so a standby can
take over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from stanpkg.stores.base import StoreError, StoreLog
from stanpkg.stores.sql.db import Database
from stanpkg.stores.sql.drivers import Cursor, one_line
from stanpkg.stores.sql.statements import Statements
from stanpkg.transport.nuid import next_nuid

__all__ = ["LOST_COUNT", "UPDATE_INTERVAL", "SqlStoreLock"]

UPDATE_INTERVAL = 1.0
LOST_COUNT = 3


class SqlStoreLock:
    def __init__(
        self,
        db: Database,
        sql: Statements,
        log: StoreLog,
        *,
        owner_id: str = "",
        interval: float = UPDATE_INTERVAL,
        lost_count: int = LOST_COUNT,
    ) -> None:
        self.db = db
        self.sql = sql
        self.log = log
        self.owner_id = owner_id or next_nuid()
        self.interval = interval
        self.lost_count = lost_count
        self.owned = False
        self._task: asyncio.Task[None] | None = None

    def attempt(self, steal: bool = False) -> tuple[bool, str, int]:
        """One locked read-and-maybe-write of the row: (acquired, owner seen, tick seen)."""
        sql, me = self.sql, self.owner_id

        def job(cur: Cursor) -> tuple[bool, str, int]:
            cur.execute(sql.LOCK_SELECT)
            row = cur.fetchone()
            owner, tick = ("", 0) if row is None else (str(row[0] or ""), int(row[1] or 0))
            if row is not None and owner and owner != me and not steal:
                return False, owner, tick
            next_tick = 1 if steal else tick + 1
            cur.execute(sql.LOCK_INSERT if row is None else sql.LOCK_UPDATE, (me, next_tick))
            return True, owner, tick

        try:
            return self.db.transaction(self.db.locker, job)
        except self.db.driver.errors as exc:
            raise StoreError(f"sql: {one_line(exc)}") from None

    async def acquire(self, on_lost: Callable[[str], None] | None = None) -> bool:
        """Try to become the owner (taking over a stale lock); on success keep the row
        updated, calling ``on_lost`` if ownership is lost."""
        if self.owned:
            return True
        acquired, owner, tick = await asyncio.to_thread(self.attempt)
        for _ in range(self.lost_count if not acquired else 0):
            await asyncio.sleep(1.5 * self.interval)
            acquired, seen_owner, seen_tick = await asyncio.to_thread(self.attempt)
            if acquired or (seen_owner, seen_tick) != (owner, tick):
                break
        else:
            if not acquired:
                acquired, _, _ = await asyncio.to_thread(self.attempt, True)
        if acquired:
            self.owned = True
            self._task = asyncio.get_running_loop().create_task(self._keep(on_lost))
        return acquired

    async def _keep(self, on_lost: Callable[[str], None] | None) -> None:
        failed = 0
        while True:
            await asyncio.sleep(self.interval)
            try:
                acquired, owner, _ = await asyncio.to_thread(self.attempt)
            except StoreError as exc:
                failed += 1
                self.log.error(f"Unable to update store lock (failed={failed} err={exc})")
                if failed < self.lost_count:
                    continue
                reason = "lost store lock, aborting"
            else:
                failed = 0
                if acquired:
                    continue
                reason = f'lost store lock to "{owner}", aborting'
            self.owned = False
            if on_lost is not None:
                on_lost(reason)
            return

    def release(self) -> None:
        """Stop updating and, if owned, clear the row (synchronous: used at close)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if not self.owned:
            return
        self.owned = False

        def job(cur: Cursor) -> None:
            cur.execute(self.sql.LOCK_UPDATE, ("", 0))

        with contextlib.suppress(*self.db.driver.errors):
            self.db.transaction(self.db.locker, job)
