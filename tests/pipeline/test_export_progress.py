"""``stanpkg export`` with stderr a pipe (systemd, cron, CI): Spark's progress bar is off
there, so the export prints periodic progress lines of its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.helpers import write_store

pytestmark = pytest.mark.slow

RUNNER = "import sys; from stanpkg.cli import main; sys.exit(main(sys.argv[1:]))"
LINE = re.compile(
    r"^stanpkg export: progress: [\d,]+ of up to 320 messages read \(\d+%\)"
    r"(, \d+/\d+ slice\(s\) done)?, \d+s$"
)


def _export(root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed (scripts/install-java.sh)")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    argv = ["export", "--dir", str(root), "--out", str(out), "--master", "local[1]", *extra]
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,  # stdout and stderr are pipes, not terminals
        text=True,
        env=env,
        timeout=300,
    )


def test_progress_lines_when_not_on_a_terminal(tmp_path: Path) -> None:
    root = write_store(tmp_path / "data", {f"ch{i}": 40 for i in range(8)}, slice_max_msgs=4)
    done = _export(root, tmp_path / "out", "--progress-every", "0.2")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "progress:" in line]
    assert lines, done.stderr
    assert all(LINE.match(line) for line in lines), lines
    assert done.stdout.startswith("exported 320 messages"), done.stdout
    print("\n".join(lines))


def test_no_progress_lines_when_turned_off(tmp_path: Path) -> None:
    root = write_store(tmp_path / "data", {"orders": 8}, slice_max_msgs=4)
    done = _export(root, tmp_path / "out", "--progress-every", "0")
    assert done.returncode == 0, done.stderr
    assert "progress:" not in done.stderr
