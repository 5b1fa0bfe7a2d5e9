"""The one table of streaming-server options.

Every option is declared here exactly once: its canonical path in the normalised
configuration, the keys (aliases) that set it in a config file, its command-line flags,
its type, default, valid range and help text. The argument parser, the JSON Schema in
``schemas/``, the defaults, ``docs/configuration.md`` and the Ansible role's variables are
derived from this table (tests check the generated files are up to date).

Paths are ``section.name``; the sections are the maps of a streaming configuration
(``store_limits``, ``file_options``, ``sql_options``, ``cluster``, ``tls``), the top level of
the streaming configuration (no dot), and ``nats_server``: options of the embedded NATS
server, which live at the top level of a NATS configuration file (not in the streaming
block) or come from the NATS server's own flags.

The table is written one module per section (the modules of this package, in
documentation order); what an option is lives in :mod:`stanpkg.plan.options.core`.
"""

from __future__ import annotations

from collections.abc import Iterator

from stanpkg.plan.options import (
    cluster,
    file_options,
    nats_server,
    sql_options,
    store_limits,
    streaming,
    tls,
)
from stanpkg.plan.options.core import CHANNELS_KEYS, SECTION_KEYS, SECTION_TITLES, Kind, Option

__all__ = [
    "BY_PATH",
    "CHANNELS_KEYS",
    "COMPOUND_FLAGS",
    "OPTIONS",
    "SECTION_KEYS",
    "SECTION_TITLES",
    "Kind",
    "Option",
    "int_default",
    "key_index",
    "options_in",
    "per_channel_key_index",
]

# In documentation order (SECTION_KEYS): the generated schema and docs follow it.
OPTIONS: tuple[Option, ...] = (
    *streaming.OPTIONS,
    *store_limits.OPTIONS,
    *file_options.OPTIONS,
    *sql_options.OPTIONS,
    *cluster.OPTIONS,
    *tls.OPTIONS,
    *nats_server.OPTIONS,
)

# Flags that set several boolean options at once.
COMPOUND_FLAGS: dict[str, tuple[str, ...]] = {
    "-SDV": ("stan_debug", "stan_trace"),
    "-DV": ("nats_server.debug", "nats_server.trace"),
}

BY_PATH: dict[str, Option] = {o.path: o for o in OPTIONS}


def options_in(section: str) -> Iterator[Option]:
    return (o for o in OPTIONS if o.section == section)


def key_index(section: str) -> dict[str, Option]:
    """Lower-cased config key -> option, for one section (keys are case-insensitive)."""
    return {k.lower(): o for o in options_in(section) for k in o.keys}


def per_channel_key_index() -> dict[str, Option]:
    return {k.lower(): o for o in options_in("store_limits") if o.per_channel for k in o.keys}


def int_default(path: str) -> int:
    """The table's default of the integer option ``path`` (sizes in bytes, durations in
    nanoseconds): for code below the plan that needs it without a plan at hand."""
    default = BY_PATH[path].default
    assert isinstance(default, int) and not isinstance(default, bool), path
    return default
