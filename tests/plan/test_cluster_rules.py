"""The reference's Raft tuning options, moot on JetStream: accepted, with a warning when
clustered; not clustered, ignored silently like every cluster option (as the reference)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.cli import main
from stanpkg.plan.compile import compile_args
from stanpkg.plan.diagnostics import Diagnostic, Severity
from stanpkg.plan.options import BY_PATH
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


def warnings_of(args: list[str]) -> list[Diagnostic]:
    compiled = compile_args(args, env={})
    assert compiled.plan is not None, compiled.diagnostics
    return [d for d in compiled.diagnostics if d.severity is Severity.WARNING]


def value_col(name: str) -> int:
    """The column of the value in ``    name: value`` (where the warning points)."""
    return 5 + len(name) + 2


def clustered_conf(tmp_path: Path, extra: str = "") -> Path:
    conf = tmp_path / "stan.conf"
    conf.write_text(
        "streaming {\n  store: file\n  dir: ds\n  cluster {\n    node_id: a\n"
        f"    bootstrap: true\n{extra}  }}\n}}\n"
    )
    return conf


@pytest.mark.parametrize("name", JETSTREAM_MANAGED)
def test_each_moot_option_is_accepted_with_a_positioned_warning(name: str, tmp_path: Path) -> None:
    conf = clustered_conf(tmp_path, f"    {name}: {VALUES[name]}\n")
    (warning,) = warnings_of(["-sc", str(conf)])
    assert f"cluster.{name} has no effect" in warning.message
    assert "JetStream" in warning.message
    assert warning.pos is not None and (warning.pos.line, warning.pos.col) == (7, value_col(name))


def test_validate_prints_each_warning_with_file_line_col(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = "".join(f"    {name}: {VALUES[name]}\n" for name in JETSTREAM_MANAGED)
    conf = clustered_conf(tmp_path, lines)
    assert main(["validate", str(conf)]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if ": warning: " in line]
    expected = [
        f"{conf}:{7 + i}:{value_col(name)}: warning: cluster.{name} has no effect"
        for i, name in enumerate(JETSTREAM_MANAGED)
    ]
    assert len(err) == len(expected)
    for line, start in zip(err, expected, strict=True):
        assert line.startswith(start), line


def test_a_flag_is_named_in_its_warning() -> None:
    args = ["-clustered", "-st", "file", "-dir", "ds", "-cluster_trailing_logs", "5"]
    (warning,) = warnings_of(args)
    assert warning.pos is None and warning.where == "-cluster_trailing_logs"


def test_no_warning_when_none_is_set(tmp_path: Path) -> None:
    assert warnings_of(["-sc", str(clustered_conf(tmp_path))]) == []


def test_no_warning_when_not_clustered() -> None:
    args = ["-st", "file", "-dir", "ds", "-cluster_log_cache_size", "5"]
    args += ["-cluster_proceed_on_restore_failure"]
    assert warnings_of(args) == []


@pytest.mark.parametrize("name", JETSTREAM_MANAGED)
def test_the_configuration_reference_says_what_each_becomes(name: str) -> None:
    option = BY_PATH[f"cluster.{name}"]
    assert option.description.startswith("Accepted for compatibility and ignored")
