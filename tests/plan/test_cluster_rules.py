"""The reference's Raft tuning options, moot on JetStream: accepted, with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.diagnostics import Severity
from stanpkg.plan.rules import JETSTREAM_MANAGED

VALUES = {
    "log_cache_size": "1024",
    "log_snapshots": "3",
    "trailing_logs": "100",
    "nodes_connections": "true",
    "bolt_free_list_sync": "true",
    "bolt_free_list_map": "true",
    "proceed_on_restore_failure": "true",
}


@pytest.mark.parametrize("name", JETSTREAM_MANAGED)
def test_each_moot_option_is_accepted_with_a_positioned_warning(name: str, tmp_path: Path) -> None:
    conf = tmp_path / "stan.conf"
    conf.write_text(
        "streaming {\n  store: file\n  dir: ds\n  cluster {\n    node_id: a\n"
        f"    bootstrap: true\n    {name}: {VALUES[name]}\n  }}\n}}\n"
    )
    compiled = compile_args(["-sc", str(conf)], env={})
    assert compiled.plan is not None
    warnings = [d for d in compiled.diagnostics if d.severity is Severity.WARNING]
    assert len(warnings) == 1
    assert f"cluster.{name} has no effect" in warnings[0].message
    assert warnings[0].pos is not None and warnings[0].pos.line == 7


def test_no_warning_when_none_is_set(tmp_path: Path) -> None:
    conf = tmp_path / "stan.conf"
    conf.write_text("streaming {\n  store: file\n  dir: ds\n  cluster { bootstrap: true }\n}\n")
    compiled = compile_args(["-sc", str(conf)], env={})
    assert compiled.plan is not None
    assert not [d for d in compiled.diagnostics if d.severity is Severity.WARNING]
