"""The pre-commit hook through the real ``pre-commit`` (``try-repo``), as a team would use
it: the changed ``.conf`` files are validated, the hook fails when one is invalid.

``try-repo`` of a working tree takes only committed and modified tracked files, so the
package is copied into a scratch git repository with one commit first (what a team's
``rev:`` would point at). pre-commit installs it into its own environment with pip (pure
Python: ``STANPKG_COMPILE=0``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.review.configs import write_problems, write_valid

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FILES = (
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
    ".pre-commit-hooks.yaml",
    "packaging/build_backend",
    "stanpkg",
)
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(900)]


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def snapshot(dest: Path) -> Path:
    for name in PACKAGE_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    return dest


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshot(tmp_path_factory.mktemp("stanpkg-repo"))


def try_repo(repo: Path, work: Path, home: Path, *files: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PRE_COMMIT_HOME=str(home), STANPKG_COMPILE="0")
    env.pop("PRE_COMMIT", None)
    return subprocess.run(
        [*PRE_COMMIT, "try-repo", str(repo), "stanpkg-validate", "--files", *files],
        cwd=work,
        env=env,
        text=True,
        capture_output=True,
        timeout=800,
    )


def test_the_manifest_is_valid() -> None:
    result = subprocess.run(
        [*PRE_COMMIT, "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "stanpkg-validate" and hook["language"] == "python"
    assert hook["entry"] == "stanpkg validate" and hook["files"] == r"\.conf$"


def test_try_repo_passes_valid_and_fails_invalid_files(
    hook_repo: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path / "configs"
    work.mkdir()
    git(work, "init", "-q")
    write_valid(work)
    write_valid(work, "other.conf")
    (work / "notes.txt").write_text("max_msgs: -1\n")  # not a .conf: not the hook's
    git(work, "add", "-A")
    home = tmp_path_factory.mktemp("pre-commit-home")

    ok = try_repo(hook_repo, work, home, "good.conf", "other.conf", "notes.txt")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "stanpkg validate" in ok.stdout and "Passed" in ok.stdout

    write_problems(work)  # stan.conf, and its include limits.conf
    git(work, "add", "-A")
    failed = try_repo(hook_repo, work, home, "good.conf", "stan.conf")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Failed" in failed.stdout
    assert 'stan.conf:5:39: error: channel "orders.>": max messages limit cannot be negative' in (
        failed.stdout
    )
    assert "limits.conf:1:12: error: max bytes limit cannot be negative (-5)" in failed.stdout
    assert "stan.conf: invalid: 2 errors" in failed.stdout
    assert "good.conf: valid" in failed.stdout
