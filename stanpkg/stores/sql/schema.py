"""The tables, checked at start-up.

The server does not create tables in PostgreSQL or MySQL (like the reference, it needs
no DDL rights: a DBA runs ``packaging/sql/<driver>.db.sql``). A missing table or column
stops the start with a message naming the script. SQLite is embedded and single-host, so
a new database file gets its tables created (:data:`SQLITE_SCHEMA`, the statements of
``packaging/sql/sqlite.db.sql``).
"""

from __future__ import annotations

from stanpkg.stores.base import StoreError
from stanpkg.stores.sql.db import Database
from stanpkg.stores.sql.drivers import Cursor, one_line

__all__ = ["SCHEMA_VERSION", "SQLITE_SCHEMA", "TABLES", "check_schema"]

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

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS ServerInfo (
    uniquerow INTEGER DEFAULT 1,
    id TEXT,
    proto BLOB,
    version INTEGER,
    PRIMARY KEY (uniquerow)
);
CREATE TABLE IF NOT EXISTS Clients (
    id TEXT,
    hbinbox TEXT,
    proto BLOB,
    PRIMARY KEY (id)
);
CREATE TABLE IF NOT EXISTS Channels (
    id INTEGER,
    name TEXT NOT NULL,
    maxseq INTEGER DEFAULT 0,
    maxmsgs INTEGER DEFAULT 0,
    maxbytes INTEGER DEFAULT 0,
    maxage INTEGER DEFAULT 0,
    deleted BOOLEAN DEFAULT FALSE,
    PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS Idx_ChannelsName ON Channels (name);
CREATE TABLE IF NOT EXISTS Messages (
    id INTEGER,
    seq INTEGER,
    timestamp INTEGER,
    size INTEGER,
    data BLOB,
    CONSTRAINT PK_MsgKey PRIMARY KEY (id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS Idx_MsgsTimestamp ON Messages (timestamp);
CREATE TABLE IF NOT EXISTS Subscriptions (
    id INTEGER,
    subid INTEGER,
    lastsent INTEGER DEFAULT 0,
    proto BLOB,
    deleted BOOLEAN DEFAULT FALSE,
    CONSTRAINT PK_SubKey PRIMARY KEY (id, subid)
);
CREATE TABLE IF NOT EXISTS SubsPending (
    subid INTEGER,
    "row" INTEGER,
    seq INTEGER DEFAULT 0,
    lastsent INTEGER DEFAULT 0,
    pending BLOB,
    acks BLOB,
    CONSTRAINT PK_MsgPendingKey PRIMARY KEY (subid, "row")
);
CREATE INDEX IF NOT EXISTS Idx_SubsPendingSeq ON SubsPending (seq);
CREATE TABLE IF NOT EXISTS StoreLock (
    id TEXT,
    tick INTEGER DEFAULT 0
);
"""


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
            for statement in SQLITE_SCHEMA.split(";"):
                if statement.strip():
                    cur.execute(statement)

        db.transaction(db.writer, create)
    for table, columns in TABLES.items():
        error = _probe(db, f"SELECT 1 FROM {table} WHERE 1=0")
        if error:
            raise StoreError(
                f"sql: table {table} is missing ({error}): "
                f"create the tables with packaging/sql/{driver}.db.sql"
            )
        error = _probe(db, f"SELECT {', '.join(columns)} FROM {table} WHERE 1=0")
        if error:
            wanted = ", ".join(columns).replace("{row}", "row")
            raise StoreError(
                f"sql: table {table} does not have the columns {wanted} ({error}): "
                f"the database was not created by this version's "
                f"packaging/sql/{driver}.db.sql"
            )

    def version(cur: Cursor) -> int | None:
        cur.execute("SELECT version FROM ServerInfo WHERE uniquerow=1")
        row = cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    found = db.read(version)
    if found is not None and found != SCHEMA_VERSION:
        raise StoreError(f"sql: unsupported version: {found} (supports [1..{SCHEMA_VERSION}])")
