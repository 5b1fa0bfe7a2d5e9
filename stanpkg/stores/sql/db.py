"""Connections of the SQL store: one writer thread that runs jobs in transactions, in
submission order, and synchronous reads on a second connection.

The event loop never waits for a write: store calls queue their statements, ``flush``
hands them to the writer thread as one job and awaits its future. Jobs run strictly in
order, so awaiting the last submitted job means everything before it is committed.
Reads (recovery, message look-ups that miss the caches) are short indexed SELECTs on
their own connection.

``max_open_conns`` caps the connections: with 1, reads share the writer's connection
(and wait for a running job); with 2, the FT lock shares the reader's; otherwise each
role has its own.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

from stanpkg.stores.base import StoreError
from stanpkg.stores.sql.drivers import Cursor, Driver, one_line

__all__ = ["Database", "Handle", "Job", "Op", "run_ops"]

T = TypeVar("T")
Job = Callable[[Cursor], T]

_CLOSE_TIMEOUT = 30.0


class Op(NamedTuple):
    """One statement (``many``: ``params`` is a list of parameter rows)."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False


def run_ops(ops: Sequence[Op]) -> Job[None]:
    def job(cur: Cursor) -> None:
        for op in ops:
            if op.many:
                cur.executemany(op.sql, op.params)
            else:
                cur.execute(op.sql, op.params)

    return job


class Handle:
    """A connection (opened on first use, reopened once broken) and its lock."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.lock = threading.Lock()
        self._conn: Any = None

    def cursor(self) -> Cursor:
        """Caller holds :attr:`lock`."""
        if self.broken():
            self.close()
            self._conn = self.driver.connect()
        cur: Cursor = self._conn.cursor()
        return cur

    def broken(self) -> bool:
        return self._conn is None or self.driver.is_broken(self._conn)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


class Database:
    def __init__(self, driver: Driver, max_open_conns: int = 0) -> None:
        self.driver = driver
        count = 1 if driver.single_connection else (max_open_conns if max_open_conns > 0 else 3)
        handles = [Handle(driver) for _ in range(min(count, 3))]
        self.writer = handles[0]
        self.reader = handles[min(1, len(handles) - 1)]
        self.locker = handles[min(2, len(handles) - 1)]
        self._handles = handles
        self._queue: queue.SimpleQueue[tuple[Future[Any], Job[Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.last: Future[Any] | None = None  # the latest submitted job

    def open(self) -> None:
        """Connect now, so that a bad DSN or an unreachable server fails the start."""
        for handle in self._handles:
            with handle.lock:
                try:
                    handle.cursor()
                except self.driver.errors as exc:
                    raise StoreError(one_line(exc)) from None
        self._thread = threading.Thread(target=self._run, name="stan-sql-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Job[T]) -> Future[T]:
        fut: Future[T] = Future()
        self._queue.put((fut, job))
        self.last = fut
        return fut

    def run(self, job: Job[T]) -> T:
        """Run a job in the writer's order and wait for it (start-up, recovery)."""
        try:
            return self.submit(job).result()
        except self.driver.errors as exc:
            raise StoreError(f"sql: {one_line(exc)}") from None

    def read(self, fn: Job[T]) -> T:
        """A read on the reader connection, from the calling thread; tried again on a
        new connection when the old one turns out to be dead (database restarted)."""
        with self.reader.lock:
            try:
                try:
                    return fn(self.reader.cursor())
                except self.driver.errors:
                    if not self.reader.broken():
                        raise
                return fn(self.reader.cursor())
            except self.driver.errors as exc:
                raise StoreError(f"sql: {one_line(exc)}") from None

    def transaction(self, handle: Handle, job: Job[T]) -> T:
        """Run ``job`` in one transaction on ``handle`` (caller's thread). A connection
        found dead at BEGIN (nothing done yet) is replaced once."""
        with handle.lock:
            cur = handle.cursor()
            try:
                cur.execute(self.driver.begin)
            except self.driver.errors:
                if not handle.broken():
                    raise
                cur = handle.cursor()
                cur.execute(self.driver.begin)
            try:
                result = job(cur)
                cur.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):
                    cur.execute("ROLLBACK")
                raise
            return result

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fut, job = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(self.transaction(self.writer, job))
            except BaseException as exc:
                fut.set_exception(exc)

    def close(self) -> None:
        """Finish the queued jobs, then close every connection (one still busy past the
        timeout, e.g. a hung server, is left to the process exit)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(_CLOSE_TIMEOUT)
            self._thread = None
        for handle in self._handles:
            if handle.lock.acquire(timeout=1.0):
                try:
                    handle.close()
                finally:
                    handle.lock.release()
