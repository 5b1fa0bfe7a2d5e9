"""Start-up failures of the SQL store: the DSN, the connection, the tables. Each one is
a one-line StoreError, which the server prints as ``Failed to start: <text>``."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.plan.sql_source import MysqlDsn, parse_mysql_dsn
from stanpkg.stores.base import StoreError
from stanpkg.stores.sql.drivers import open_driver
from stanpkg.stores.sql.schema import TABLES, script_path, statements
from tests.stores.sql.conftest import ROOT, Databases, Target, sql_script


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("/db", MysqlDsn(addr="127.0.0.1:3306", dbname="db")),
        (
            "u:p@ss:w@rd@tcp(db.example:3307)/nss?timeout=5s&charset=utf8",
            MysqlDsn(
                user="u",
                password="p@ss:w@rd",
                addr="db.example:3307",
                dbname="nss",
                params={"timeout": "5s", "charset": "utf8"},
            ),
        ),
        (
            "root@unix(/run/mysqld.sock)/",
            MysqlDsn(user="root", net="unix", addr="/run/mysqld.sock"),
        ),
        ("u@tcp/x?a=%2F", MysqlDsn(user="u", addr="127.0.0.1:3306", dbname="x", params={"a": "/"})),
    ],
)
def test_mysql_dsn_forms(dsn: str, expected: MysqlDsn) -> None:
    assert parse_mysql_dsn(dsn) == expected


@pytest.mark.parametrize(
    ("dsn", "error"),
    [
        ("not a dsn", "invalid DSN: missing the slash separating the database name"),
        (
            "u:p@tcp(host:3306/db",
            "invalid DSN: network address not terminated (missing closing brace)",
        ),
        ("u:p@tcp(h)x/db", "invalid DSN: did you forget to escape a param value?"),
        ("u@bogus/db", "default addr for network 'bogus' unknown"),
        ("u@bogus(h:1)/db", "unsupported network 'bogus' (one of tcp, tcp4, tcp6, unix)"),
    ],
)
def test_mysql_dsn_errors_use_the_go_driver_wording(dsn: str, error: str) -> None:
    with pytest.raises(StoreError) as info:
        open_driver("mysql", dsn)
    assert str(info.value) == error


def test_unknown_driver() -> None:
    with pytest.raises(StoreError, match=r'^sql: unknown driver "" \(forgotten import\?\)$'):
        open_driver("", "x")


def test_bad_postgres_dsn() -> None:
    with pytest.raises(StoreError, match=r'^missing "=" after "not" in connection info string$'):
        open_driver("postgres", "not a dsn")


@pytest.mark.parametrize(
    ("driver", "source", "error"),
    [
        ("postgres", "host=127.0.0.1 port=1 user=u dbname=d", "Connection refused"),
        ("mysql", "u:p@tcp(127.0.0.1:1)/d", "Error 2003: Can't connect to MySQL server"),
        ("sqlite", "/nonexistent-dir/store.db", "unable to open database file"),
    ],
)
def test_unreachable_database(driver: str, source: str, error: str) -> None:
    target = Target(driver, source)
    with pytest.raises(StoreError) as info:
        target.open()
    assert error in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("driver", ["postgres", "mysql"])
def test_missing_tables_point_at_the_script(driver: str, databases: Databases) -> None:
    databases.source(driver)  # skips when the database server is unavailable
    target = Target(driver, databases.create(driver, databases.dsns[driver], tables=False))
    with pytest.raises(StoreError) as info:
        target.open()
    text = str(info.value)
    assert text.startswith("sql: table ServerInfo is missing (")
    assert text.endswith(f"create the tables with {script_path(driver)}")


def test_missing_column_is_reported(target: Target) -> None:
    target.open().close()  # SQLite: creates the tables
    [create] = [s for s in sql_script(target.driver) if "EXISTS Clients (" in s]
    target.execute("DROP TABLE Clients")
    target.execute("CREATE TABLE Clients (id VARCHAR(256), hbinbox TEXT)")  # before 0.10.0
    try:
        with pytest.raises(StoreError) as info:
            target.open()
    finally:  # the database is shared by the session's tests
        target.execute("DROP TABLE Clients")
        target.execute(create)
    assert str(info.value).startswith(
        "sql: table Clients does not have the columns id, hbinbox, proto ("
    )


def test_unsupported_schema_version(target: Target) -> None:
    target.open().close()
    target.execute("INSERT INTO ServerInfo (id, proto, version) VALUES ('x', ?, 2)", (b"",))
    with pytest.raises(StoreError) as info:
        target.open()
    assert str(info.value) == "sql: unsupported version: 2 (supports [1..1])"


def test_sqlite_store_creates_its_tables(tmp_path: object) -> None:
    target = Target("sqlite", f"{tmp_path}/new.db")
    target.open().close()
    assert target.query("SELECT COUNT(*) FROM StoreLock") == [(0,)]


def test_packaging_scripts_are_the_shipped_ones() -> None:
    for driver in ("postgres", "mysql", "sqlite"):
        assert sql_script(driver) == statements(Path(script_path(driver)).read_text())


def test_create_scripts_define_the_reference_tables() -> None:
    for driver in ("postgres", "mysql", "sqlite"):
        text = (ROOT / "packaging" / "sql" / f"{driver}.db.sql").read_text()
        for table in TABLES:
            assert f"CREATE TABLE IF NOT EXISTS {table} (" in text
