"""``stanpkg validate --format gitlab``: a GitLab Code Quality report as GitLab's
documentation defines it ("Code Quality report format": a JSON array of objects with
``description``, ``check_name``, ``fingerprint``, ``severity`` one of info, minor, major,
critical, blocker, ``location.path`` relative to the repository, ``location.lines.begin``),
checked with fastjsonschema against a schema written from that table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from stanpkg.cli import main
from stanpkg.plan.compile import compile_args
from tests.review.configs import write_valid

ISSUE = {
    "type": "object",
    "required": ["description", "check_name", "fingerprint", "severity", "location"],
    "properties": {
        "description": {"type": "string", "minLength": 1},
        "check_name": {"type": "string", "minLength": 1},
        "fingerprint": {"type": "string", "minLength": 1},
        "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
        "location": {
            "type": "object",
            "required": ["path", "lines"],
            "properties": {
                "path": {"type": "string", "minLength": 1, "not": {"pattern": "^/"}},
                "lines": {
                    "type": "object",
                    "required": ["begin"],
                    "properties": {"begin": {"type": "integer", "minimum": 1}},
                },
            },
        },
    },
}
REPORT = {"type": "array", "items": ISSUE}


def report(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[Any]]:
    status = main(["validate", "--format", "gitlab", *args])
    doc = json.loads(capsys.readouterr().out)
    fastjsonschema.validate(REPORT, doc, use_default=False)
    return status, doc


@pytest.mark.usefixtures("problems_here")
def test_one_issue_per_diagnostic(capsys: pytest.CaptureFixture[str]) -> None:
    expected = compile_args(["stan.conf"], positional_config=True).diagnostics
    status, issues = report(["stan.conf"], capsys)
    assert status == 1 and len(issues) == len(expected) == 3
    for issue, diag in zip(issues, expected, strict=True):
        assert diag.pos is not None
        assert issue["check_name"] == diag.code and issue["description"] == diag.message
        assert issue["location"] == {"path": diag.pos.file, "lines": {"begin": diag.pos.line}}
        assert issue["severity"] == ("critical" if diag.severity.value == "error" else "minor")
    assert len({issue["fingerprint"] for issue in issues}) == len(issues)
    _status, again = report(["stan.conf"], capsys)
    assert [i["fingerprint"] for i in again] == [i["fingerprint"] for i in issues]  # stable


def test_valid_is_an_empty_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_valid(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert report(["good.conf"], capsys) == (0, [])
