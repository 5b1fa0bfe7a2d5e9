"""``stanpkg run`` on every conformance case: the STREAM log lines match the reference's.

Each case runs as a real server process in an empty directory (as recorded), until it
prints ``Streaming Server is ready`` or exits. Its ``STREAM:`` lines, normalised as the
conformance README describes, must equal the recorded ones; rejected cases must exit
non-zero, and cases that fail only at run time must fail at run time.
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conformance.cases import RUNTIME_ONLY, USAGE_ERRORS, Case, load_cases
from tests.transport.conftest import free_port

CASES = load_cases()
LINE = re.compile(r"^\[\d+\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[(\w+)\] (.*)$")
NUID = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{22}(?![A-Za-z0-9])")
# Lines whose values differ by run or build; "stanpkg version" is our own product line.
DROPPED = (
    "STREAM: ServerID: ",
    "STREAM: Go version: ",
    "STREAM: Git commit: ",
    "STREAM: stanpkg version ",
)

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
        if text.startswith(("STREAM: Cluster Node ID : ", "STREAM: Cluster Log Path: ")):
            text = NUID.sub("<nuid>", text)  # rule 5 of the conformance README
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
    stdout = proc.stdout
    lines: queue.Queue[str | None] = queue.Queue()

    # A reader thread: a server that waits quietly (a clustered node whose peers never
    # come up) must not block the test on a read.
    def read() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    output: list[str] = []
    deadline = time.monotonic() + 20
    code: int | None = None
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break  # still running after the deadline
            if line is None:
                code = proc.wait(timeout=10)
                break
            output.append(line)
            if "Streaming Server is ready" in line:
                break
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        elif code is None:
            code = proc.returncode
    return code, "".join(output)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
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
