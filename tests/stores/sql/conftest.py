"""Databases for the SQL-store tests.

PostgreSQL and MariaDB come from ``STANPKG_TEST_PG_DSN`` / ``STANPKG_TEST_MYSQL_DSN``; when
unset, ``scripts/start-databases.sh`` is run once (it installs and starts both servers on
127.0.0.1). A driver's tests are skipped only when its variable is unset and the script
could not provide it. Every test gets an empty schema (PostgreSQL), database (MariaDB) or
file (SQLite), with the tables of packaging/sql/<driver>.db.sql (SQLite: none, the store
creates them).
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.stores.encryption import EncryptingStore
from stanpkg.stores.factory import create_store
from stanpkg.stores.sql import SqlStore
from stanpkg.stores.sql.drivers import open_driver
from stanpkg.stores.sql.schema import TABLES, statements
from tests.server.conftest import nats_url, node_modules, pytest_pyfunc_call

__all__ = ["nats_url", "node_modules", "pytest_pyfunc_call"]

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "start-databases.sh"
DRIVERS = ("sqlite", "postgres", "mysql")
ENV = {"postgres": "STANPKG_TEST_PG_DSN", "mysql": "STANPKG_TEST_MYSQL_DSN"}
_names = itertools.count(1)


def sql_script(driver: str) -> list[str]:
    """The statements of packaging/sql/<driver>.db.sql (links to the shipped scripts)."""
    return statements((ROOT / "packaging" / "sql" / f"{driver}.db.sql").read_text())


@pytest.fixture(scope="session")
def database_dsns() -> dict[str, str]:
    """Driver → DSN, or driver → "SKIP: <reason>"."""
    found = {driver: os.environ.get(var, "") for driver, var in ENV.items()}
    if all(found.values()):
        return found
    try:
        proc = subprocess.run(
            ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=900, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        error = str(exc)
    else:
        error = proc.stderr.strip()[-500:] if proc.returncode else ""
        for name, value in re.findall(r"^export (\w+)='([^']*)'$", proc.stdout, re.M):
            for driver, var in ENV.items():
                if name == var and not found[driver]:
                    found[driver] = value
    for driver, var in ENV.items():
        if not found[driver]:
            found[driver] = f"SKIP: {var} is unset and {SCRIPT.name} could not start it: {error}"
    return found


class Log:
    """A StoreLog that keeps the lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def notice(self, text: str) -> None:
        self.lines.append(f"[INF] {text}")

    def warn(self, text: str) -> None:
        self.lines.append(f"[WRN] {text}")

    def error(self, text: str) -> None:
        self.lines.append(f"[ERR] {text}")

    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Target:
    """One empty database of one driver."""

    driver: str
    source: str
    log: Log = field(default_factory=Log)

    def plan(self, *args: str, cluster_id: str = "test-cluster") -> Plan:
        argv = ["-cid", cluster_id, "-st", "sql", "--sql_driver", self.driver]
        compiled = compile_args([*argv, "--sql_source", self.source, *args], env={})
        assert compiled.plan is not None, (compiled.usage_error, compiled.diagnostics)
        return compiled.plan

    def open(self, *args: str) -> SqlStore:
        """The store as the factory builds it: behind the encrypting store when ``args``
        turn encryption on."""
        store = create_store(self.plan(*args), self.log)
        assert isinstance(store.inner if isinstance(store, EncryptingStore) else store, SqlStore)
        return store  # type: ignore[return-value]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of a statement written with ``?`` placeholders, on a new connection."""
        driver = open_driver(self.driver, self.source)
        conn: Any = driver.connect()
        try:
            cur = conn.cursor()
            if params:
                cur.execute(driver.sql(sql), tuple(params))
            else:  # no parameters: "%" is not a placeholder then
                cur.execute(driver.sql(sql))
            return [tuple(row) for row in cur.fetchall()] if cur.description else []
        finally:
            conn.close()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.query(sql, params)

    def kill_connections(self) -> int:
        """End the server side of every other connection to this database (what a
        database restart does to the store); returns how many."""
        if self.driver == "postgres":
            name = self.source.rpartition("application_name=")[2]
            rows = self.query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name=? AND pid <> pg_backend_pid()",
                (name,),
            )
            return len(rows)
        assert self.driver == "mysql"
        ids = self.query(
            "SELECT id FROM information_schema.PROCESSLIST WHERE db=DATABASE() "
            "AND id <> CONNECTION_ID()"
        )
        for (conn_id,) in ids:
            self.execute(f"KILL {int(conn_id)}")
        return len(ids)

    def execute_all(self, statements: Sequence[str]) -> None:
        driver = open_driver(self.driver, self.source)
        conn: Any = driver.connect()
        try:
            cur = conn.cursor()
            for statement in statements:
                cur.execute(driver.sql(statement))
        finally:
            conn.close()


class Databases:
    """One schema (PostgreSQL) or database (MariaDB) per driver and session, with the
    tables of packaging/sql; tests get it emptied."""

    def __init__(self, dsns: dict[str, str]) -> None:
        self.dsns = dsns
        self.sources: dict[str, str] = {}
        self._drops: list[tuple[Target, str]] = []

    def source(self, driver: str) -> str:
        if driver not in self.sources:
            base = self.dsns[driver]
            if base.startswith("SKIP: "):
                pytest.skip(base[6:])
            self._drop_stale(driver, base)
            self.sources[driver] = self.create(driver, base)
        return self.sources[driver]

    @staticmethod
    def _drop_stale(driver: str, base: str) -> None:
        """Schemas/databases left by test runs that were killed."""
        admin = Target(driver, base)
        if driver == "postgres":
            names = admin.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stanpkg_t%'")
            drop = "DROP SCHEMA {} CASCADE"
        else:
            names = admin.query("SHOW DATABASES LIKE 'stanpkg\\_t%'")
            drop = "DROP DATABASE {}"
        for (name,) in names:
            match = re.fullmatch(r"stanpkg_t(\d+)_\d+", str(name))
            if match and not os.path.exists(f"/proc/{match[1]}"):
                admin.execute(drop.format(name))

    def create(self, driver: str, base: str, *, tables: bool = True) -> str:
        name = f"stanpkg_t{os.getpid()}_{next(_names)}"
        admin = Target(driver, base)
        if driver == "postgres":
            admin.execute(f"CREATE SCHEMA {name}")
            source = f"{base} options=-csearch_path={name} application_name={name}"
            self._drops.append((admin, f"DROP SCHEMA {name} CASCADE"))
        else:
            admin.execute(f"CREATE DATABASE {name}")
            source = f"{base.rpartition('/')[0]}/{name}"
            self._drops.append((admin, f"DROP DATABASE {name}"))
        if tables:
            Target(driver, source).execute_all(sql_script(driver))
        return source

    def close(self) -> None:
        for admin, statement in reversed(self._drops):
            admin.execute(statement)


@pytest.fixture(scope="session")
def databases(database_dsns: dict[str, str]) -> Iterator[Databases]:
    dbs = Databases(database_dsns)
    yield dbs
    dbs.close()


def _target(driver: str, databases: Databases, tmp_path: Path) -> Target:
    if driver == "sqlite":
        return Target(driver, str(tmp_path / "store.db"))
    found = Target(driver, databases.source(driver))
    found.execute_all([f"DELETE FROM {table}" for table in TABLES])
    return found


@pytest.fixture(params=DRIVERS)
def target(request: pytest.FixtureRequest, databases: Databases, tmp_path: Path) -> Target:
    """An empty store database of each driver in turn."""
    return _target(str(request.param), databases, tmp_path)


@pytest.fixture(params=("postgres", "mysql"))
def server_target(request: pytest.FixtureRequest, databases: Databases, tmp_path: Path) -> Target:
    """An empty PostgreSQL or MariaDB store database."""
    return _target(str(request.param), databases, tmp_path)
