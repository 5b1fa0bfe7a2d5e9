"""``stanpkg validate``/``plan``/``limits`` as reviewers run them: exit codes and output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stanpkg.cli import main

GOOD = 'streaming { cluster_id: "c1", store_limits { max_msgs: 5, channels { "a.>": {} } } }\n'


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stanpkg.cli", *args],
        cwd=cwd,
        text=True,
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "stan.conf"
    path.write_text(GOOD)
    return path


def test_valid_prints_limits_and_summary(conf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(conf)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "---------- Store Limits ----------"
    assert out[-1].endswith("valid: MEMORY store, standalone, 1 channel configured")


def test_invalid_exit_1_with_all_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("streaming {\n  hbf: -1\n  store: nosuch\n}\n")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{bad}:2:8: error: heartbeat fail count")
    assert err[1].startswith(f"{bad}:3:10: error: store_type")
    assert err[-1] == "invalid: 2 errors"


@pytest.mark.parametrize(
    "args",
    [
        ["-x"],
        ["-mm", "abc"],
        ["-SD", "true", "f.conf"],
        ["--format", "yaml"],
        ["-sc", "a.conf", "b.conf"],
    ],
)
def test_usage_errors_exit_2_on_one_line(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stanpkg: ")


def test_strict_turns_warnings_into_errors(tmp_path: Path) -> None:
    conf = tmp_path / "w.conf"
    conf.write_text("streaming { max_mgs: 1 }\n")
    assert main(["validate", str(conf)]) == 0
    assert main(["validate", "--strict", str(conf)]) == 1


def test_json_output(tmp_path: Path, conf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--format", "json", str(conf)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is True and doc["summary"]["channels"] == 1
    assert doc["limits"][0] == "---------- Store Limits ----------"
    bad = tmp_path / "bad.conf"
    bad.write_text("streaming { store_limits { max_msgs: -3 } }")
    assert main(["validate", "--format=json", "-sc", str(bad)]) == 1
    doc = json.loads(capsys.readouterr().out)
    (diag,) = doc["diagnostics"]
    assert diag == {
        "severity": "error",
        "code": "range",
        "file": str(bad),
        "line": 1,
        "column": 38,
        "message": "max messages limit cannot be negative (-3)",
    }


def test_plan_command_prints_json(conf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(conf), "--encryption_key", "k"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cluster_id"] == "c1" and doc["encryption_key"] == "<redacted>"
    assert doc["store_limits"]["channels"]["a.>"]["max_msgs"] == 5


def test_limits_command(conf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["limits", "-sc", str(conf), "-mc", "0"]) == 0
    assert "Channels:            unlimited" in capsys.readouterr().out


def test_as_a_process_never_tracebacks(tmp_path: Path) -> None:
    (tmp_path / "x.conf").write_bytes(b"streaming { cluster_id: \xff\xfe }\n")
    proc = run(["validate", "x.conf"], tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("x.conf:1:")


def test_explain_lists_configured_values_with_sources(
    conf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--explain", str(conf), "-mm", "9", "--encryption_key", "s3"]) == 0
    out = capsys.readouterr().out
    assert "store_limits.max_msgs = 9  (flag -mm)" in out
    assert f'cluster_id = "c1"  (file {conf}:1:25)' in out
    assert "encryption_key = <redacted>  (flag --encryption_key)" in out
    assert "s3" not in out


def test_nats_passthrough_checked_by_real_nats_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nats = tmp_path / "nats.conf"
    nats.write_text("authorization { user: a, password: b, bogus_key: 1 }\nstreaming {}\n")
    assert main(["validate", "-c", str(nats)]) == 1
    assert 'unknown field "bogus_key"' in capsys.readouterr().err
    nats.write_text("authorization { user: a, password: b }\nstreaming {}\n")
    assert main(["validate", "-c", str(nats)]) == 0
