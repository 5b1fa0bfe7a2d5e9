"""docs/validate.md's "Config review" section says what the commands really print for its
example change, and its CI and pre-commit snippets are well-formed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from stanpkg.cli import main

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "validate.md").read_text().split("## Config review", 1)[1]
SECTION = SECTION.split("\n## ", 1)[0]
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", SECTION, flags=re.S)


def _example(tmp_path: Path) -> None:
    """main/deploy/stan.conf and deploy/stan.conf as the section shows them (the store's
    directory moved under tmp_path)."""
    base = BLOCKS[0][1].replace("/var/lib/stanpkg", str(tmp_path / "data"))
    old_lines, new_lines = BLOCKS[1][1].splitlines()
    lines = base.splitlines()
    assert lines[7].startswith('      "orders.>"') and lines[8].startswith('      "orders.audit"')
    changed = "\n".join([*lines[:7], old_lines, new_lines, *lines[9:]]) + "\n"
    (tmp_path / "main" / "deploy").mkdir(parents=True)
    (tmp_path / "deploy").mkdir()
    (tmp_path / "main" / "deploy" / "stan.conf").write_text(base)
    (tmp_path / "deploy" / "stan.conf").write_text(changed)


def _shown(command: str) -> str:
    for _lang, text in BLOCKS:
        if text.startswith(f"$ {command}\n"):
            return text.split("\n", 1)[1]
    raise AssertionError(command)


def test_the_diff_shown_is_what_diff_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _example(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "main/deploy/stan.conf", "deploy/stan.conf"]) == 3
    assert capsys.readouterr().out == _shown("stanpkg diff main/deploy/stan.conf deploy/stan.conf")


def test_the_annotation_shown_is_what_validate_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _example(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--format", "github", "deploy/stan.conf"]) == 0
    line = capsys.readouterr().out.strip()
    assert f"  {line}\n" in SECTION
    assert main(["validate", "deploy/stan.conf"]) == 0
    warning = capsys.readouterr().err.strip()
    assert warning in _shown("stanpkg validate --against http://stan-1:8222 deploy/stan.conf")


def test_the_snippets_are_well_formed() -> None:
    snippets = [yaml.safe_load(text) for lang, text in BLOCKS if lang == "yaml"]
    github, gitlab, pre_commit = snippets
    steps = github["jobs"]["review"]["steps"]
    assert any("--format github" in step.get("run", "") for step in steps)
    assert gitlab["stan-config"]["artifacts"]["reports"]["codequality"] == (
        "gl-code-quality-report.json"
    )
    (repo,) = pre_commit["repos"]
    assert repo["hooks"] == [{"id": "stanpkg-validate"}]
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [hook["id"] for hook in hooks] == ["stanpkg-validate"]
