"""Creating the store a plan asks for, without the server knowing its implementation."""

from __future__ import annotations

from stanpkg.plan.model import Plan, StoreType
from stanpkg.stores.base import Store, StoreError, StoreLog

__all__ = ["create_store"]


def create_store(plan: Plan, log: StoreLog) -> Store:
    """The store of ``plan.store_type``, wrapped in the encrypting store when the plan
    encrypts. Raises :class:`StoreError` when it cannot be created (its text is reported
    as ``Failed to start: <text>``)."""
    if not plan.encrypt:
        return _create_unencrypted_store(plan, log)
    # Imported only here: cryptography's modules take memory in every server that loads
    # them (the memory store's footprint is a benchmarked figure).
    from stanpkg.stores.encryption import EncryptingStore, encryption_from_plan

    encryption = encryption_from_plan(plan)  # key and cipher problems before any I/O
    store = _create_unencrypted_store(plan, log)
    if encryption is None:
        return store
    return EncryptingStore(store, encryption.key, encryption.cipher, log)


def _create_unencrypted_store(plan: Plan, log: StoreLog) -> Store:
    if plan.cluster.clustered:
        return _create_clustered_store(plan, log)
    return _create_plain_store(plan, log)


def _create_clustered_store(plan: Plan, log: StoreLog) -> Store:
    """Every replicated fact in JetStream; the node's own store options are not used
    (plan.cluster.node_id is resolved by the node before)."""
    from stanpkg.stores.jetstream.store import ClusteredStore, ClusterSettings

    return ClusteredStore(plan, log, ClusterSettings.from_plan(plan))


def _create_plain_store(plan: Plan, log: StoreLog) -> Store:
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
