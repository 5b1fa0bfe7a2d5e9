"""A stanpkg server as its own process, restartable on the same store, killable with -9.

Its output goes to a file (never a pipe nobody reads, which would block the server once
full); readiness is the reference's "Streaming Server is ready" line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.server.conftest import ROOT
from tests.server.test_process import RUNNER

READY = "Streaming Server is ready"


class StanProcess:
    def __init__(self, cluster_id: str, args: list[str], log_dir: Path) -> None:
        self.cluster_id = cluster_id
        self.args = args
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = log_dir / "stan-0.log"

    def start(self, timeout: float = 20.0) -> None:
        self.starts += 1
        self.log_path = self.log_dir / f"stan-{self.starts}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", RUNNER, "-cid", self.cluster_id, *self.args],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_for(READY, timeout)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not seen in {self.log_path}:\n{self.output()}")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        """SIGTERM and the exit code (or -9 after a kill)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def exit_code(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
