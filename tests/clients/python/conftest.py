"""The Python STAN client from PyPI (asyncio-nats-streaming 0.4.0) against the server.

The client needs the old ``asyncio-nats-client`` (module ``nats``, which conflicts with the
nats-py 2.x of the project venv) and an old protobuf, so it lives in its own virtual
environment: ``<repo>/.cache/stan-python-client/``, created once with ``python3 -m venv``
and ``pip install -r requirements.txt`` and reused while its copy of the requirements
matches. The tests are skipped with the reason when it cannot be created (no network).
Each test runs one scenario of ``stan_scenarios.py`` with that interpreter; the scenario
prints one JSON object as its last stdout line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.scenarios import run_scenario_async
from tests.server.conftest import nats_url, node_modules, pytest_pyfunc_call

__all__ = ["nats_url", "node_modules", "pytest_pyfunc_call"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
REQUIREMENTS = HERE / "requirements.txt"
SCRIPT = HERE / "stan_scenarios.py"
VENV = ROOT / ".cache" / "stan-python-client"
STAMP = "stanpkg-requirements.txt"  # the requirements the venv was built from
SCENARIO_TIMEOUT = 50.0  # the script's own limit is 40 s


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _usable(venv: Path, wanted: str) -> bool:
    stamp = venv / STAMP
    python = venv_python(venv)
    if not stamp.is_file() or stamp.read_text() != wanted or not python.exists():
        return False
    check = subprocess.run(
        [str(python), "-I", "-c", "import stan.aio.client"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return check.returncode == 0


def _create(venv: Path, wanted: str) -> str:
    """Creates the venv; returns "" or why it failed."""
    shutil.rmtree(venv, ignore_errors=True)
    base = shutil.which("python3") or sys.executable
    python = str(venv_python(venv))
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    steps = [
        [base, "-m", "venv", str(venv)],
        [*pip, "-r", str(REQUIREMENTS)],
        [python, "-I", "-c", "import stan.aio.client"],
    ]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            error = str(exc)
        else:
            if done.returncode == 0:
                continue
            lines = [line for line in done.stderr.splitlines() if " is ignored: " not in line]
            error = "\n".join(lines)[-1500:] or f"exit status {done.returncode}"
        shutil.rmtree(venv, ignore_errors=True)
        return f"`{' '.join(step[:4])} ...` failed: {error}"
    (venv / STAMP).write_text(wanted)  # last: marks the venv complete
    return ""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One creator at a time across concurrent pytest sessions (POSIX)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            import fcntl
        except ImportError:  # Windows: no lock
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def stan_python() -> Path:
    """The interpreter of the client's venv (created on first use)."""
    wanted = REQUIREMENTS.read_text()
    with _locked(VENV.parent / f"{VENV.name}.lock"):
        if not _usable(VENV, wanted):
            error = _create(VENV, wanted)
            if error:
                pytest.skip(f"could not create the Python STAN client venv at {VENV}: {error}")
    return venv_python(VENV)


async def run_scenario(
    python: Path, name: str, url: str, cluster_id: str, timeout: float = SCENARIO_TIMEOUT
) -> dict[str, Any]:
    """Runs one scenario with the client venv's interpreter, isolated (``-I``: neither the
    project nor PYTHON* variables leak in), without blocking the event loop."""
    argv = [str(python), "-I", str(SCRIPT), name, url, cluster_id]
    return await run_scenario_async(argv, name, timeout, cwd=HERE)
