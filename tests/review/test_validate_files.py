"""``stanpkg validate a.conf b.conf``: each file checked on its own with the same flags
(what a pre-commit hook calls); the status is 1 when any one is invalid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stanpkg.cli import main
from tests.review.configs import write_problems, write_valid


def test_every_file_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, other = write_valid(tmp_path), write_valid(tmp_path, "other.conf")
    assert main(["validate", str(good), str(other)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{good}: valid: FILE store, standalone, 1 channel configured",
        f"{other}: valid: FILE store, standalone, 1 channel configured",
    ]
    bad = write_problems(tmp_path)
    assert main(["validate", str(good), str(bad), str(other)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == f"{bad}: invalid: 2 errors"
    assert captured.out.count("valid: FILE store") == 2


def test_the_flags_apply_to_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, other = write_valid(tmp_path), write_valid(tmp_path, "other.conf")
    assert main(["validate", str(good), "-mm", "-1", str(other)]) == 1
    err = capsys.readouterr().err
    assert err.count("-mm: error:") == 2


def test_json_of_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = write_valid(tmp_path), write_problems(tmp_path)
    assert main(["validate", "--format", "json", str(good), str(bad)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is False
    assert [(f["file"], f["valid"]) for f in doc["files"]] == [(str(good), True), (str(bad), False)]
    assert main(["validate", "--format", "json", str(good)]) == 0
    assert "files" not in json.loads(capsys.readouterr().out)  # one file: as before


@pytest.mark.parametrize(
    "args", [["-sc", "a.conf", "b.conf"], ["-SD", "true", "a.conf"], ["a.conf", "--format", "x"]]
)
def test_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *args]) == 2
    assert capsys.readouterr().err.startswith("stanpkg: ")
