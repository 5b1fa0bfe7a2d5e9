"""``stanpkg run`` on every conformance case: the STREAM log lines match the reference's.

Each case runs as a real server process in an empty directory (as recorded), until it
prints ``Streaming Server is ready`` or exits. Its ``STREAM:`` lines, normalised as the
conformance README describes, must equal the recorded ones; rejected cases must exit
non-zero, and cases that fail only at run time must fail at run time.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conformance.cases import RUNTIME_ONLY, USAGE_ERRORS, Case, load_cases
from tests.transport.conftest import free_port

CASES = load_cases()
LINE = re.compile(r"^\[\d+\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[(\w+)\] (.*)$")
DROPPED = ("STREAM: ServerID: ", "STREAM: Go version: ", "STREAM: Git commit: ")
# Clustered mode is not implemented yet: its cases are strict xfail (they flag when it is).
UNSUPPORTED = re.compile(r"(^\s*cluster\s*[{:=]|--clustered)", re.M | re.I)

pytestmark = pytest.mark.slow


def normalise(output: str) -> list[str]:
    lines = []
    for raw in output.splitlines():
        match = LINE.match(raw)
        if not match:
            continue
        level, text = match.groups()
        if "STREAM: " not in text or text.startswith(DROPPED):
            continue
        text = re.sub(r"^(STREAM: Starting nats-streaming-server\[.*\]) version .*$", r"\1", text)
        lines.append(text if level == "INF" else f"[{level}] {text}")
    return lines


def expected_stream_lines(case: Case) -> list[str]:
    return [ln for ln in case.log_lines if ln.startswith("STREAM:") or ln[6:].startswith("STREAM:")]


def run_case(case: Case, cwd: Path) -> tuple[int | None, str]:
    argv = case.argv(port=free_port(), http_port=free_port())
    env = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C", **case.env}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stanpkg.cli", "run", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + 20
    code: int | None = None
    try:
        for line in proc.stdout:
            output.append(line)
            if "Streaming Server is ready" in line or time.monotonic() > deadline:
                break
        else:
            code = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        elif code is None:
            code = proc.returncode
    return code, "".join(output)


def _param(case: Case) -> object:
    if case.stanpkg_accepts and UNSUPPORTED.search(case.conf.read_text() + " ".join(case.args)):
        reason = "clustered mode is not implemented yet"
        return pytest.param(case, id=case.name, marks=pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(case, id=case.name)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_run_matches_reference(case: Case, tmp_path: Path) -> None:
    code, output = run_case(case, tmp_path)
    assert "Traceback" not in output
    if case.name in USAGE_ERRORS:
        assert code == 2, output
    elif case.name in RUNTIME_ONLY:
        assert code == 1, output
        assert "[FTL] STREAM: Failed to start: " in output
    elif not case.stanpkg_accepts:
        assert code == 1, output
    else:
        assert code is None, f"server exited with {code}:\n{output}"
        assert normalise(output) == expected_stream_lines(case)
