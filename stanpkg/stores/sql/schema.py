"""The tables, checked at start-up.

The server does not create tables in PostgreSQL or MySQL (like the reference, it needs
no DDL rights: a DBA runs ``scripts/<driver>.db.sql``). A missing table or column
stops the start with a message naming the script. SQLite is embedded and single-host, so
a new database file gets its tables created (:data:`SQLITE_SCHEMA`, the statements of
``scripts/sqlite.db.sql``). The scripts ship inside the package (and under packaging/sql).
"""

from __future__ import annotations

from importlib import resources

from stanpkg.stores.base import StoreError
from stanpkg.stores.sql.db import Database
from stanpkg.stores.sql.drivers import Cursor, one_line

__all__ = ["SCHEMA_VERSION", "SQLITE_SCHEMA", "TABLES", "check_schema", "script_path", "statements"]

SCHEMA_VERSION = 1

TABLES: dict[str, tuple[str, ...]] = {
    "ServerInfo": ("uniquerow", "id", "proto", "version"),
    "Clients": ("id", "hbinbox", "proto"),
    "Channels": ("id", "name", "maxseq", "maxmsgs", "maxbytes", "maxage", "deleted"),
    "Messages": ("id", "seq", "timestamp", "size", "data"),
    "Subscriptions": ("id", "subid", "lastsent", "proto", "deleted"),
    "SubsPending": ("subid", "{row}", "seq", "lastsent", "pending", "acks"),
    "StoreLock": ("id", "tick"),
}

SCRIPTS = resources.files("stanpkg.stores.sql") / "scripts"


def script_path(driver: str) -> str:
    """The create script of a driver, as installed with the package."""
    return str(SCRIPTS / f"{driver}.db.sql")


def statements(script: str) -> list[str]:
    """The SQL statements of a create script (``--`` comment lines dropped)."""
    text = "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


# The one definition of the SQLite tables: the shipped script, run on a new database file.
SQLITE_SCHEMA = statements((SCRIPTS / "sqlite.db.sql").read_text(encoding="utf-8"))


def _probe(db: Database, sql: str) -> str:
    """The first line of the driver's error for ``sql``, or "" when it runs."""

    def run(cur: Cursor) -> None:
        cur.execute(db.driver.sql(sql))
        cur.fetchall()

    with db.reader.lock:
        try:
            run(db.reader.cursor())
        except db.driver.errors as exc:
            return one_line(exc, first_line=True)
    return ""


def check_schema(db: Database) -> None:
    """Every table and column is there and the stored schema version is supported."""
    driver = db.driver.name
    if driver == "sqlite" and _probe(db, "SELECT 1 FROM ServerInfo WHERE 1=0"):

        def create(cur: Cursor) -> None:
            for statement in SQLITE_SCHEMA:
                cur.execute(statement)

        db.transaction(db.writer, create)
    for table, columns in TABLES.items():
        error = _probe(db, f"SELECT 1 FROM {table} WHERE 1=0")
        if error:
            raise StoreError(
                f"sql: table {table} is missing ({error}): "
                f"create the tables with {script_path(driver)}"
            )
        error = _probe(db, f"SELECT {', '.join(columns)} FROM {table} WHERE 1=0")
        if error:
            wanted = ", ".join(columns).replace("{row}", "row")
            raise StoreError(
                f"sql: table {table} does not have the columns {wanted} ({error}): "
                f"the database was not created by this version's {script_path(driver)}"
            )

    def version(cur: Cursor) -> int | None:
        cur.execute("SELECT version FROM ServerInfo WHERE uniquerow=1")
        row = cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    found = db.read(version)
    if found is not None and found != SCHEMA_VERSION:
        raise StoreError(f"sql: unsupported version: {found} (supports [1..{SCHEMA_VERSION}])")
