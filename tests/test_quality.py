"""The code base stays ruff-clean, formatted and mypy-clean (strict) on stanpkg/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check() -> None:
    proc = _run(
        str(BIN / "ruff"), "check", "stanpkg", "tests", "bench", "packaging", "windows", "ansible"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = _run(
        str(BIN / "ruff"),
        "format",
        "--check",
        "stanpkg",
        "tests",
        "bench",
        "packaging",
        "windows",
        "ansible",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_strict() -> None:
    proc = _run(str(BIN / "mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
