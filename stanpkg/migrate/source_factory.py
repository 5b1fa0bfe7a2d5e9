"""Opens the store a standalone server's configuration describes, read-only, for
``stanpkg migrate``: a FILE store (:mod:`.file_source`) or an SQL store (:mod:`.sql_source`).
"""

from __future__ import annotations

from collections.abc import Callable

from stanpkg.migrate.file_source import open_file_source
from stanpkg.migrate.source_store import SourceError, SourceStore
from stanpkg.migrate.sql_source import open_sql_source
from stanpkg.plan.model import Plan, StoreType

__all__ = ["open_source_store"]


def open_source_store(
    plan: Plan,
    *,
    wants_channel: Callable[[str], bool],
    permissive: bool = False,
    keep_encrypted: bool = False,
) -> SourceStore:
    """The store of ``plan`` (its ``dir`` or SQL source, limits, CRC and encryption
    key), read-only."""
    if plan.store_type is StoreType.SQL:
        return open_sql_source(
            plan, wants_channel=wants_channel, permissive=permissive, keep_encrypted=keep_encrypted
        )
    if plan.store_type is not StoreType.FILE:
        raise SourceError(
            f"the source store is {plan.store_type.name}: stanpkg migrate reads FILE stores "
            "and SQL stores"
        )
    return open_file_source(
        plan, wants_channel=wants_channel, permissive=permissive, keep_encrypted=keep_encrypted
    )
