"""The files derived from the options table are up to date, and the table is consistent."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stanpkg.plan import model
from stanpkg.plan.generate import generated_files
from stanpkg.plan.options import OPTIONS, SECTION_KEYS

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_are_current() -> None:
    for rel, text in generated_files().items():
        on_disk = (ROOT / rel).read_text(encoding="utf-8")
        assert on_disk == text, f"{rel} is stale: run python -m stanpkg.plan.generate"


SECTION_CLASSES = {
    "": model.Plan,
    "file_options": model.FileOptions,
    "sql_options": model.SqlOptions,
    "cluster": model.ClusterOptions,
    "tls": model.TlsOptions,
    "nats_server": model.NatsServerOptions,
}
NOT_OPTIONS = {
    "store_limits",
    "file_options",
    "sql_options",
    "cluster",
    "tls",
    "nats_server",
    "config_file",
    "provenance",
    "passthrough",
}


# Section fields the compiler derives rather than reads from one option.
DERIVED_SECTION_FIELDS = {
    "config_file",
    "passthrough",
    "passthrough_positions",
    "monitor_tls_cert",
    "monitor_tls_key",
}


def test_plan_fields_match_the_table() -> None:
    for section, cls in SECTION_CLASSES.items():
        table = {o.name for o in OPTIONS if o.section == section}
        not_options = NOT_OPTIONS if cls is model.Plan else DERIVED_SECTION_FIELDS
        fields = {f.name for f in dataclasses.fields(cls)} - not_options
        assert fields == table, section


def test_every_alias_and_flag_is_unique() -> None:
    seen: dict[tuple[str, str], str] = {}
    flags: dict[str, str] = {}
    for opt in OPTIONS:
        for key in opt.keys:
            assert (opt.section, key.lower()) not in seen, key
            seen[(opt.section, key.lower())] = opt.path
        for flag in opt.flags:
            assert flag.lstrip("-") not in flags, flag
            flags[flag.lstrip("-")] = opt.path
    assert set(SECTION_KEYS) >= {o.section for o in OPTIONS}
