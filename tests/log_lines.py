"""A child process whose output is collected line by line by a reader thread, so tests can
wait for a log line while the process runs and read the whole log after it stops."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path


class LineReadingProcess:
    def __init__(
        self, argv: list[str], *, cwd: Path | str, env: Mapping[str, str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """The first line matching the regular expression ``pattern``, waiting for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if match := re.search(pattern, line):
                    return match
            if self.proc.poll() is not None:
                self._reader.join(2)
                break
            time.sleep(0.02)
        raise AssertionError(f"{pattern!r} not seen; log:\n{self.log}")

    def stop(self, timeout: float = 15.0, sig: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)
        return self.proc.returncode
