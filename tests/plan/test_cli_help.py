"""Every command answers --help with help, and a missing file is said plainly."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.cli import main


@pytest.mark.parametrize("command", ["validate", "diff", "plan", "limits"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_compiling_commands_print_their_help(
    command: str, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Usage: stanpkg {command} ")
    assert "Store Limits" not in out and '"cluster_id"' not in out  # nothing compiled
    assert "-sc,  --stan_config" in out  # the server flags it also takes


def test_validate_help_lists_its_own_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--strict", "--help", "missing.conf"]) == 0
    out = capsys.readouterr().out
    for option in (
        "--strict",
        "--format FORMAT",
        "text (default), json, sarif",
        "--explain",
        "--against URL",
        "--against-ca FILE",
        "--against-nats URL",
    ):
        assert option in out


def test_the_command_list_names_diff_and_the_review_formats(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "diff [flags] OLD NEW" in out and "text, json, sarif, github or gitlab" in out


def test_bench_help_says_usage_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: stanpkg bench [-s server")
    assert out.lower().count("usage:") == 1


@pytest.mark.parametrize(
    "args",
    [["validate", "{f}"], ["plan", "{f}"], ["limits", "-sc", "{f}"], ["run", "-c", "{f}"]],
)
def test_missing_config_file_is_said_plainly(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.conf"
    assert main([a.format(f=missing) for a in args]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"error: cannot read {missing}: No such file or directory"
    assert ":0:0" not in err


def test_missing_file_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.conf"
    assert main(["validate", "--format", "json", str(missing)]) == 1
    out = capsys.readouterr().out
    assert '"code": "file"' in out and '"line"' not in out


def test_a_directory_is_not_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot read {tmp_path}: not a regular file")
