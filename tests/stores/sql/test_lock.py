"""The FT store lock (StoreLock table), with a 0.1 s update interval instead of 1 s."""

from __future__ import annotations

import asyncio

from stanpkg.stores.sql import SqlStore
from stanpkg.stores.sql.lock import SqlStoreLock
from tests.stores.sql.conftest import Target

INTERVAL = 0.1


def lock_of(store: SqlStore, owner: str) -> SqlStoreLock:
    return SqlStoreLock(store.db, store.sql, store.log, owner_id=owner, interval=INTERVAL)


async def test_one_owner_then_hand_over_on_release(target: Target) -> None:
    first_store, second_store = target.open(), target.open()
    first, second = lock_of(first_store, "A"), lock_of(second_store, "B")
    assert await first.acquire()
    assert await first.acquire()  # already owned
    assert not await second.acquire()  # A keeps ticking
    [(owner, tick)] = target.query("SELECT id, tick FROM StoreLock")
    assert owner == "A" and tick >= 2
    first.release()
    assert target.query("SELECT id, tick FROM StoreLock") == [("", 0)]
    assert await second.acquire()
    second.release()
    first_store.close()
    second_store.close()


async def test_a_stale_lock_is_taken_over_and_the_old_owner_told(target: Target) -> None:
    first_store, second_store = target.open(), target.open()
    lost: list[str] = []
    first, second = lock_of(first_store, "A"), lock_of(second_store, "B")
    assert await first.acquire(lost.append)
    assert first._task is not None
    first._task.cancel()  # A hangs: no more updates
    assert await second.acquire()
    assert target.query("SELECT id FROM StoreLock") == [("B",)]
    first._task = asyncio.get_running_loop().create_task(first._keep(lost.append))
    await asyncio.sleep(INTERVAL * 3)
    assert lost == ['lost store lock to "B", aborting']
    assert not first.owned
    second.release()
    first_store.close()
    second_store.close()


async def test_store_close_releases_its_lock(target: Target) -> None:
    store = target.open()
    assert await store.acquire_exclusive_lock()
    [(owner, _)] = target.query("SELECT id, tick FROM StoreLock")
    assert owner
    store.close()
    assert target.query("SELECT id, tick FROM StoreLock") == [("", 0)]
