"""What the role's README and docs/clustering.md say about rolling out: every figure of a
rolling restart comes with the command that measures it, and both say how a configuration
change reaches a cluster (one node at a time, the opt-out) and what a failed rollout leaves."""

from __future__ import annotations

import re

import pytest

from tests.packaging.fixtures import ROOT

README = ROOT / "ansible" / "roles" / "stanpkg" / "README.md"
CLUSTERING = ROOT / "docs" / "clustering.md"


def _rolling_section() -> str:
    text = CLUSTERING.read_text()
    return text.split("## Rolling out with Ansible", 1)[1].split("\n## ", 1)[0]


def _texts() -> dict[str, str]:
    return {"README": README.read_text(), "clustering.md": _rolling_section()}


@pytest.mark.parametrize("name", ["README", "clustering.md"])
def test_rolling_restart_figures_name_their_command(name: str) -> None:
    paragraphs = re.split(r"\n\s*\n", _texts()[name])
    timed = [
        p
        for p in paragraphs
        if re.search(r"(?is)rolling restart.*?\b\d+ s\b", p.replace("\n", " "))
    ]
    assert timed, f"{name}: no figure for a rolling restart"
    for paragraph in timed:
        assert "pytest -s" in paragraph and "tests/ansible/test_cluster_" in paragraph, paragraph


@pytest.mark.parametrize("name", ["README", "clustering.md"])
def test_a_config_change_and_a_failed_rollout_are_described(name: str) -> None:
    text = " ".join(_texts()[name].split())
    assert "stanpkg_restart_on_change: false" in text
    assert "one node at a time" in text
    assert "IS DOWN" in text and "name=stanpkg state=started" in text
