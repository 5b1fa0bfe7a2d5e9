"""Options of the table: the SQL store (``sql_options``)."""

from __future__ import annotations

from stanpkg.plan.options.core import Kind, Option

OPTIONS: tuple[Option, ...] = (
    Option(
        "sql_options.driver",
        Kind.STRING,
        "",
        'Name of the SQL Driver ("mysql", "postgres" or "sqlite")',
        keys=("driver",),
        flags=("--sql_driver",),
        choices=("mysql", "postgres", "sqlite"),
    ),
    Option(
        "sql_options.source",
        Kind.STRING,
        "",
        "Datasource used when opening an SQL connection to the database",
        keys=("source",),
        flags=("--sql_source",),
        secret=True,
    ),
    Option(
        "sql_options.no_caching",
        Kind.BOOL,
        False,
        "Enable/Disable caching for improved performance",
        keys=("no_caching",),
        flags=("--sql_no_caching",),
    ),
    Option(
        "sql_options.max_open_conns",
        Kind.INT,
        0,
        "Maximum number of opened connections to the database",
        keys=("max_open_conns", "max_conns"),
        flags=("--sql_max_open_conns",),
        minimum=0,
        range_error="max open connections cannot be negative (got {value})",
    ),
    Option(
        "sql_options.bulk_insert_limit",
        Kind.INT,
        0,
        "Maximum number of messages stored with a single SQL insert (0 to disable)",
        keys=("bulk_insert_limit",),
        flags=("--sql_bulk_insert_limit",),
        minimum=0,
        range_error="bulk insert limit cannot be negative (got {value})",
    ),
)
