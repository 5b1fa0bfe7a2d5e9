"""Creating the store a plan asks for, without the server knowing its implementation."""

from __future__ import annotations

from stanpkg.plan.model import Plan, StoreType
from stanpkg.stores.base import Store, StoreError, StoreLog

__all__ = ["create_store"]


def create_store(plan: Plan, log: StoreLog) -> Store:
    """The store of ``plan.store_type``. Raises :class:`StoreError` when it cannot be
    created (its text is reported as ``Failed to start: <text>``)."""
    if plan.store_type is StoreType.MEMORY:
        from stanpkg.stores.memory import MemoryStore

        return MemoryStore(plan.store_limits, log)
    if plan.store_type is StoreType.FILE:
        from stanpkg.stores.file import FileStore, config_from_plan

        return FileStore(config_from_plan(plan), log)
    if plan.store_type is StoreType.SQL:
        from stanpkg.stores.sql import create_sql_store

        return create_sql_store(plan, log)
    raise StoreError(f"store type {plan.store_type.value} is not available in this build")
