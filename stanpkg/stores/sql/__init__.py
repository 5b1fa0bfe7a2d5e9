"""The SQL store (``-st sql``): PostgreSQL, MySQL/MariaDB or an embedded SQLite file.

Tables and columns are those of the reference's scripts (``scripts/*.db.sql``, also linked
from packaging/sql/), so a database used by nats-streaming-server can be used by this
server and back.
"""

from __future__ import annotations

from stanpkg.plan.model import Plan
from stanpkg.stores.base import StoreLog
from stanpkg.stores.sql.db import Database
from stanpkg.stores.sql.drivers import open_driver
from stanpkg.stores.sql.schema import check_schema
from stanpkg.stores.sql.store import SqlStore

__all__ = ["SqlStore", "create_sql_store"]


def create_sql_store(plan: Plan, log: StoreLog) -> SqlStore:
    """Connect, check the tables and return the store; :class:`StoreError` (reported as
    ``Failed to start: <text>``) on a bad DSN, an unreachable server or a bad schema."""
    options = plan.sql_options
    driver = open_driver(options.driver, options.source.reveal())
    db = Database(driver, options.max_open_conns)
    try:
        db.open()
        check_schema(db)
    except BaseException:
        db.close()
        raise
    return SqlStore(
        plan.store_limits,
        log,
        db,
        no_caching=options.no_caching,
        bulk_insert_limit=options.bulk_insert_limit,
    )
