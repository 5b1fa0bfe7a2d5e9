"""The three SQL drivers: how to connect, which SQL dialect details differ, which
exceptions mean "database error".

``mysql`` takes the Go driver's DSN (``user:password@tcp(host:port)/dbname?params``, as
the reference's configurations have it) and connects with PyMySQL; ``postgres`` takes a
libpq DSN or URL and connects with psycopg 3; ``sqlite`` takes a file path (or a ``file:``
URI) and uses the standard library.

Every connection runs in autocommit mode: the writer wraps each job in an explicit
``BEGIN``/``COMMIT``, readers see the latest committed state with each statement.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from stanpkg.plan.gotime import DurationError, parse_duration
from stanpkg.plan.sql_drivers import OPTIONAL_DRIVERS, install_hint
from stanpkg.plan.sql_source import DsnError, parse_mysql_dsn
from stanpkg.stores.base import StoreError

__all__ = ["Connection", "Cursor", "Driver", "one_line", "open_driver"]

CONNECT_TIMEOUT = 10  # seconds, unless the DSN says otherwise (libpq's default is forever)


class Cursor(Protocol):
    """The DB-API cursor subset the store uses."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, params: Sequence[Sequence[Any]], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...

    def __iter__(self) -> Any: ...


class Connection(Protocol):
    def cursor(self) -> Any: ...

    def close(self) -> None: ...


def one_line(exc: BaseException, *, first_line: bool = False) -> str:
    """A driver's message on one line (libpq's are multi-line; PyMySQL's are a
    ``(code, text)`` tuple, shown the way the Go driver shows them)."""
    args = exc.args
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], str):
        text = f"Error {args[0]}: {args[1]}"
    else:
        text = str(exc)
    if first_line:
        text = text.strip().split("\n", 1)[0]
    return " ".join(text.split()) or type(exc).__name__


@dataclass(frozen=True)
class Driver:
    name: str
    connect: Callable[[], Connection]
    errors: tuple[type[BaseException], ...]
    placeholder: str = "%s"
    row_column: str = '"row"'  # "row" is a keyword in MySQL and SQLite
    begin: str = "BEGIN"
    for_update: str = " FOR UPDATE"
    single_connection: bool = False  # SQLite ":memory:": every connection is another DB
    is_broken: Callable[[Connection], bool] = field(default=lambda conn: False)

    def sql(self, text: str) -> str:
        """Statements are written with ``?`` placeholders and ``{row}`` for that column."""
        text = text.replace("{row}", self.row_column)
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)


def open_driver(name: str, source: str) -> Driver:
    """Validate ``source`` for ``name`` and return the driver (no connection yet)."""
    if name == "postgres":
        return _postgres(source)
    if name == "mysql":
        return _mysql(source)
    if name == "sqlite":
        return _sqlite(source)
    raise StoreError(f'sql: unknown driver "{name}" (forgotten import?)')


# -- PostgreSQL ----------------------------------------------------------------------------


def _load(name: str) -> Any:
    """The DB-API module (untyped here: drivers are optional, stubs too)."""
    try:
        return importlib.import_module(OPTIONAL_DRIVERS[name][0])
    except ImportError as exc:
        raise StoreError(install_hint(name, str(exc))) from None


def _postgres(source: str) -> Driver:
    psycopg = _load("postgres")
    try:
        params = psycopg.conninfo.conninfo_to_dict(source)
    except psycopg.Error as exc:
        raise StoreError(one_line(exc)) from None
    extra: dict[str, Any] = {}
    if "connect_timeout" not in params:
        extra["connect_timeout"] = CONNECT_TIMEOUT

    def connect() -> Connection:
        return cast(Connection, psycopg.connect(source, autocommit=True, **extra))

    def is_broken(conn: Any) -> bool:
        return bool(conn.closed or conn.broken)

    return Driver("postgres", connect, (psycopg.Error,), is_broken=is_broken)


# -- MySQL / MariaDB -------------------------------------------------------------------------


def _seconds(params: dict[str, str], key: str) -> float | None:
    text = params.get(key)
    if not text:
        return None
    try:
        return parse_duration(text) / 1e9
    except DurationError as exc:
        raise StoreError(f"invalid DSN: {key}: {exc}") from None


def _host_port(addr: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port``."""
    if addr.startswith("["):
        host, _, rest = addr[1:].partition("]")
        port = rest[1:]
    elif addr.count(":") == 1:
        host, _, port = addr.partition(":")
    else:
        host, port = addr, ""
    return host, int(port) if port.isdigit() else 3306


def _mysql(source: str) -> Driver:
    pymysql = _load("mysql")
    try:
        dsn = parse_mysql_dsn(source)  # the plan's rule checked it already; tools may not
    except DsnError as exc:
        raise StoreError(str(exc)) from None
    kwargs: dict[str, Any] = {
        "user": dsn.user,
        "password": dsn.password,
        "database": dsn.dbname or None,
        "autocommit": True,
        "charset": dsn.params.get("charset", "utf8mb4").split(",")[0],
        "connect_timeout": _seconds(dsn.params, "timeout") or CONNECT_TIMEOUT,
        "read_timeout": _seconds(dsn.params, "readTimeout"),
        "write_timeout": _seconds(dsn.params, "writeTimeout"),
    }
    if dsn.net == "unix":
        kwargs["unix_socket"] = dsn.addr
    else:  # parse_mysql_dsn admits only the TCP networks besides
        kwargs["host"], kwargs["port"] = _host_port(dsn.addr)
    tls = dsn.params.get("tls", "false").lower()
    if tls in ("true", "skip-verify", "preferred"):
        kwargs["ssl"] = {} if tls == "true" else {"check_hostname": False, "verify_mode": 0}

    def connect() -> Connection:
        return cast(Connection, pymysql.connect(**kwargs))

    def is_broken(conn: Any) -> bool:
        return not conn.open

    return Driver(
        "mysql",
        connect,
        (pymysql.MySQLError,),
        row_column="`row`",
        is_broken=is_broken,
    )


# -- SQLite ----------------------------------------------------------------------------------


def _sqlite(source: str) -> Driver:
    uri = source.startswith("file:")
    memory = source == ":memory:" or (uri and "mode=memory" in source)
    if not uri and not memory:
        parent = os.path.dirname(os.path.abspath(source))
        if not os.path.isdir(parent):
            raise StoreError(f"sql: unable to open database file {source!r}: no directory {parent}")

    def connect() -> Connection:
        conn = sqlite3.connect(
            source, uri=uri, isolation_level=None, check_same_thread=False, timeout=10
        )
        if not memory:
            conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        conn.execute("PRAGMA synchronous=FULL")  # a committed PubAck survives power loss
        return cast(Connection, conn)

    return Driver(
        "sqlite",
        connect,
        (sqlite3.Error,),
        placeholder="?",
        begin="BEGIN IMMEDIATE",
        for_update="",
        single_connection=memory,
    )
