"""Running one client scenario program (C or Python STAN client) and reading its report:
the program prints one JSON object as its last stdout line, ``{"ok": true, "result": ...}``
or ``{"ok": false, "error": "..."}``."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["read_report", "run_scenario_async", "run_scenario_sync"]


def read_report(name: str, returncode: int | None, out: bytes, err: bytes) -> dict[str, Any]:
    """The scenario's result; fails the test with its error and stderr."""
    lines = out.decode(errors="replace").strip().splitlines()
    stderr = err.decode(errors="replace")
    assert lines, f"no output from scenario {name} (exit {returncode}):\n{stderr}"
    report: dict[str, Any] = json.loads(lines[-1])
    assert report["ok"], f"scenario {name} failed: {report['error']}\n{stderr}"
    assert returncode == 0, f"scenario {name} exited {returncode}:\n{stderr}"
    result: dict[str, Any] = report["result"]
    return result


async def run_scenario_async(
    argv: list[str], name: str, timeout: float, cwd: Path | None = None
) -> dict[str, Any]:
    """Without blocking the event loop (the server under test may run in it)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"scenario {name} did not end within {timeout} s") from None
    return read_report(name, proc.returncode, out, err)


def run_scenario_sync(
    argv: list[str], name: str, timeout: float, cwd: Path | None = None
) -> dict[str, Any]:
    """For a server in another process."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout, check=False)
    return read_report(name, done.returncode, done.stdout, done.stderr)
