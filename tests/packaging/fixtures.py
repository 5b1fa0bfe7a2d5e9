"""Building the distribution artifacts once per test session, and the tool checks the
packaging tests share. Fixtures are defined in conftest.py files from these helpers; the
builds are memoised here so two test directories never build twice."""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
VENV_BIN = Path(sys.executable).parent
VERSION = str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
INSTALL_HINT = "install the packaging tools: bash packaging/install-tools.sh test"


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None and not (VENV_BIN / t).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed ({INSTALL_HINT})")


def _run(args: list[str], timeout: float = 900) -> str:
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    return proc.stdout


@functools.cache
def build_python() -> Path:
    """dist/ wheel + sdist and the wheelhouse (needs the package index)."""
    _run(["bash", "packaging/build-python.sh"])
    return DIST


@functools.cache
def build_deb() -> Path:
    build_python()
    _run(["bash", "packaging/deb/build.sh"])
    return DIST / f"stanpkg_{VERSION}-1_amd64.deb"


@functools.cache
def build_rpm() -> Path:
    build_python()
    _run(["bash", "packaging/rpm/build.sh"])
    return DIST / f"stanpkg-{VERSION}-1.x86_64.rpm"


@functools.cache
def build_nupkg() -> Path:
    build_python()
    _run([sys.executable, "windows/chocolatey/build_nupkg.py"])
    return DIST / f"stanpkg.{VERSION}.nupkg"


@functools.cache
def build_formula() -> Path:
    build_python()
    _run([sys.executable, "packaging/homebrew/render_formula.py"])
    return DIST / "stanpkg.rb"


def load_script(relpath: str) -> ModuleType:
    """A script of the repository as a module (packaging/ is not importable by name: the
    ``packaging`` library owns that name)."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stan_roundtrip(url: str, channel: str, count: int) -> None:
    """A STAN client publishes ``count`` messages to the server at ``url`` (cluster
    test-cluster) and reads them back (tests/packaging/stan_roundtrip.py)."""
    client = [sys.executable, "-m", "tests.packaging.stan_roundtrip"]
    proc = subprocess.run(
        [*client, url, "test-cluster", channel, str(count)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["ok"]
