"""Importing the bench scripts' modules from tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import CompletedProcess

ROOT = Path(__file__).resolve().parents[2]
BENCH = str(ROOT / "bench")


@contextmanager
def bench_on_path() -> Iterator[None]:
    """bench/ on sys.path only while importing from it: its script names (processes.py,
    …) must not shadow other modules for the rest of the test session."""
    saved = list(sys.path)
    sys.path.insert(0, BENCH)
    try:
        yield
    finally:
        sys.path[:] = saved


def run_bench_script(script: str, *args: str, env: dict[str, str]) -> CompletedProcess[str]:
    """``bench/<script>`` run by this interpreter, its output captured; env adds to ours."""
    return subprocess.run(
        [sys.executable, os.path.join(BENCH, script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | env,
        check=False,
    )
