"""``docs/configuration.md``, generated from the options table (a test keeps it current)."""

from __future__ import annotations

from stanpkg.plan.gotime import format_duration
from stanpkg.plan.options import (
    CHANNELS_KEYS,
    COMPOUND_FLAGS,
    OPTIONS,
    SECTION_KEYS,
    SECTION_TITLES,
    Kind,
    Option,
)
from stanpkg.plan.sql_source import NETWORKS
from stanpkg.plan.units import friendly_bytes

HEADER = """\
# Configuration reference

<!-- Generated from stanpkg/plan/options/ by `python -m stanpkg.plan.generate`. Do not edit. -->

stanpkg reads the NATS configuration format (`key: value`, `key = value` or `key value`;
maps in `{ }`; arrays in `[ ]`; `#` and `//` comments; `include "file"`; `$VARIABLES`;
sizes such as `10MB`; durations as strings such as `"1h30m"`). Option names are
case-insensitive and every alias below is accepted.

Where options come from, lowest precedence first: built-in defaults, the configuration
file (`-sc FILE`, or `-c FILE` with a `streaming { }` block), the environment
(`NATS_STREAMING_ENCRYPTION_KEY`), command-line flags. Flags always win.

The streaming options live in a `streaming { }` block of the file, or at its top level when
there is no such block. Sections below are maps inside the streaming options; the embedded
NATS server's options live at the top level of the NATS configuration file.

Check a configuration with `stanpkg validate FILE`; see `docs/validate.md`.
"""

# What each driver's `source` is (the MySQL form is plan/sql_source.py's parser).
_OTHER_NETWORKS = [f"`{n}`" for n in NETWORKS if n != "tcp"]
SQL_SOURCES = f"""\
`source` by driver:

- `postgres`: a libpq connection string or URI: `host=db port=5432 dbname=nss user=nss
  password=...`, `postgres://nss:...@db:5432/nss`.
- `mysql` (also MariaDB): the Go driver's DSN
  `[user[:password]@][net[(addr)]]/dbname[?param=value&...]`, e.g.
  `nss:secret@tcp(db:3306)/nss_db?timeout=5s`. `net` is `tcp` (the default; without an
  address `127.0.0.1:3306`), {", ".join(_OTHER_NETWORKS[:-1])} or {_OTHER_NETWORKS[-1]}
  (`unix` defaults to `/tmp/mysql.sock`). The last `/`
  starts the database name and the last `@` before it ends the credentials, so a password
  may contain `@`, `:` and `/`; write a `/` in a parameter value as `%2F`. Parameter
  values are URL-decoded; stanpkg uses `charset`, `timeout`, `readTimeout`,
  `writeTimeout` and `tls` (`true`, `skip-verify`, `preferred`) and ignores the others.
- `sqlite`: a file path (its directory must exist), a `file:` URI, or `:memory:`.
"""


def _default(opt: Option) -> str:
    if opt.default_doc:
        return opt.default_doc
    value = opt.default
    if opt.secret:
        return "(none)"
    if opt.kind is Kind.DURATION and isinstance(value, int):
        return (
            "unlimited"
            if value == 0 and opt.section == "store_limits"
            else f"`{format_duration(value)}`"
        )
    if opt.kind is Kind.SIZE and isinstance(value, int):
        return f"`{value}` ({friendly_bytes(value)})" if value else "`0`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return "(none)" if not value else f"`{', '.join(value)}`"
    if value == "":
        return "(none)"
    return f"`{value}`"


def _cell(items: tuple[str, ...]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else "–"


def _row(opt: Option) -> str:
    notes = opt.description
    if opt.choices:
        notes += f" One of: {', '.join(opt.choices)}."
    if opt.env:
        notes += f" Environment: `{opt.env}`."
    if opt.per_channel:
        notes += " Also per channel."
    notes = notes.replace("|", "\\|")  # a bare | would end the table cell
    return (
        f"| `{opt.name}` | {_cell(opt.keys)} | {_cell(opt.flags)} | {opt.kind.value} | "
        f"{_default(opt)} | {notes} |"
    )


def configuration_markdown() -> str:
    parts = [HEADER]
    for section, keys in SECTION_KEYS.items():
        title = SECTION_TITLES[section]
        parts.append(f"## {title}\n")
        if keys:
            parts.append(f"Map keys: {_cell(keys)}.\n")
        if section == "store_limits":
            parts.append(
                f"Per-channel limits: a map named {_cell(CHANNELS_KEYS)} inside the store "
                "limits, from channel name (wildcards `*` and `>` allowed) to a map of the "
                'limits marked "Also per channel". An absent limit is inherited from the '
                "closest wider entry (or the global value); `0` means unlimited.\n"
            )
        if section == "sql_options":
            parts.append(SQL_SOURCES)
        parts.append("| option | config keys | flags | type | default | description |")
        parts.append("|---|---|---|---|---|---|")
        parts += [_row(o) for o in OPTIONS if o.section == section]
        parts.append("")
    parts.append("## Compound flags\n")
    parts += [
        f"- `{flag}` sets {', '.join(f'`{p}`' for p in paths)}."
        for flag, paths in COMPOUND_FLAGS.items()
    ]
    parts.append("")
    return "\n".join(parts)
