"""Building the distribution artifacts once per test session, and the tool checks the
packaging tests share. Fixtures are defined in conftest.py files from these helpers; the
builds are memoised here so two test directories never build twice."""

from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.packaging.containers import Machine

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
VERSION = str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
INSTALL_HINT = "install the packaging tools: bash packaging/install-tools.sh test"
# Where the clean build runs (one per test session): a fresh copy of this checkout.
BUILD_DIR_ENV = "STANPKG_CLEAN_BUILD_DIR"


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None and not (VENV_BIN / t).exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed ({INSTALL_HINT})")


def _run(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 2400
) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}{proc.stderr[-5000:]}"
        )
    return proc.stdout


def fresh_copy(dest: Path) -> Path:
    """A clone of this checkout with its uncommitted changes (a clean checkout in CI)."""
    _run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)], cwd=ROOT)
    changed = _run(
        ["git", "ls-files", "-z", "--modified", "--others", "--exclude-standard"], cwd=ROOT
    )
    for name in filter(None, changed.split("\0")):
        source, target = ROOT / name, dest / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.exists():  # deleted in the work tree
            target.unlink()
    return dest


def clean_env(home: Path) -> dict[str, str]:
    """An environment sharing nothing with the test venv: no venv on PATH, no PYTHONPATH,
    no pip or mypy cache, a home of its own."""
    venv_bin = str(VENV_BIN)
    path = ":".join(p for p in os.environ.get("PATH", "").split(":") if p and p != venv_bin)
    home.mkdir(parents=True, exist_ok=True)
    # The machine's interpreters are no cache: pyenv's stay findable with another HOME
    # (build-python.sh compiles for each CPython it finds).
    pyenv = shutil.which("pyenv")
    pyenv_root = os.environ.get("PYENV_ROOT") or (
        subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        if pyenv
        else ""
    )
    return {
        **({"PYENV_ROOT": pyenv_root} if pyenv_root else {}),
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "MYPY_CACHE_DIR": str(home / "mypy-cache"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }


@functools.cache
def clean_build() -> Path:
    """``make dist`` as a new user runs it: in a fresh copy of the checkout, with a venv of
    its own made by the Makefile, in :func:`clean_env`. Returns the copy; its ``dist/`` and
    ``build/packaging/`` hold every artifact the packaging tests check."""
    # A place to keep it, for a look afterwards; a finished build there is used again.
    kept = os.environ.get(BUILD_DIR_ENV)
    base = Path(kept or tempfile.mkdtemp(prefix="stanpkg-dist-"))
    tree, done = base / "src", base / "done"
    if kept and done.exists():
        return tree
    if not kept:
        atexit.register(shutil.rmtree, base, True)
    shutil.rmtree(base, ignore_errors=True)
    fresh_copy(tree)
    _run(["make", "dist"], cwd=tree, env=clean_env(base / "home"))
    done.touch()
    return tree


def dist_dir() -> Path:
    return clean_build() / "dist"


def build_dir() -> Path:
    """build/packaging of the clean build: the wheelhouses."""
    return clean_build() / "build" / "packaging"


def build_python() -> Path:
    """dist/ wheels + sdist and the wheelhouses (needs the package index)."""
    return dist_dir()


def build_deb() -> Path:
    return dist_dir() / f"stanpkg_{VERSION}-1_amd64.deb"


def build_rpm() -> Path:
    return dist_dir() / f"stanpkg-{VERSION}-1.x86_64.rpm"


def build_nupkg() -> Path:
    return dist_dir() / f"stanpkg.{VERSION}.nupkg"


def build_formula() -> Path:
    return dist_dir() / "stanpkg.rb"


def pip_install_in_a_new_venv(
    target: Path, tmp_path: Path, env: dict[str, str] | None = None
) -> Path:
    """A new venv of Debian's python3.11 with ``target`` (a wheel, sdist or source tree)
    pip-installed into it, as a user would; returns the venv."""
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3.11", "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(target),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert pip.returncode == 0, pip.stderr[-4000:]
    return venv


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


def roundtrip_in_netns(
    machine: Machine,
    channel: str,
    count: int,
    *,
    stored: int = -1,
    cluster_id: str = "test-cluster",
) -> dict[str, Any]:
    """tests/packaging/stan_roundtrip.py run in ``machine``'s network namespace against
    the server installed there (port 4222): its JSON line. ``stored`` >= 0 first checks
    that the channel already holds that many messages."""
    argv = [sys.executable, "-m", "tests.packaging.stan_roundtrip", "nats://127.0.0.1:4222"]
    argv += [cluster_id, channel, str(count), "--expect-stored", str(stored)]
    proc = machine.host_in_netns(argv, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
