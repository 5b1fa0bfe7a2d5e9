"""The official NATS C client (nats.c, streaming API) against the server.

``stan_scenarios.c`` is compiled once per session with gcc against the system's libnats
(Debian: ``libnats-dev``); the tests are skipped with the reason when gcc, pkg-config or
libnats are missing. Each test runs one scenario of the program, which prints one JSON
object as its last stdout line.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clients.scenarios import run_scenario_async, run_scenario_sync
from tests.server.conftest import nats_url, node_modules, pytest_pyfunc_call

__all__ = ["nats_url", "node_modules", "pytest_pyfunc_call"]

SOURCE = Path(__file__).resolve().parent / "stan_scenarios.c"
SCENARIO_TIMEOUT = 45.0  # the program's own watchdog ends it after 30 s


def _pkg_config(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pkg-config", *args], capture_output=True, text=True, timeout=30, check=False
    )


@dataclass(frozen=True)
class CClient:
    """The compiled scenario program."""

    binary: Path

    def argv(self, name: str, url: str, cluster_id: str) -> list[str]:
        return [str(self.binary), name, url, cluster_id]

    async def run(
        self, name: str, url: str, cluster_id: str, timeout: float = SCENARIO_TIMEOUT
    ) -> dict[str, Any]:
        """Against a server running in the test's event loop."""
        return await run_scenario_async(self.argv(name, url, cluster_id), name, timeout)

    def run_sync(
        self, name: str, url: str, cluster_id: str, timeout: float = SCENARIO_TIMEOUT
    ) -> dict[str, Any]:
        """Against a server in another process."""
        return run_scenario_sync(self.argv(name, url, cluster_id), name, timeout)


@pytest.fixture(scope="session")
def c_client(tmp_path_factory: pytest.TempPathFactory) -> CClient:
    """``stan_scenarios.c`` built with ``gcc -std=c99 -Wall -Werror`` against libnats."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the nats.c client tests compile a C program")
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed: it locates libnats (apt-get install pkg-config)")
    if _pkg_config("--exists", "libnats").returncode != 0:
        pytest.skip("libnats is not installed (apt-get install libnats-dev): nats.c tests")
    flags = _pkg_config("--cflags", "--libs", "libnats")
    assert flags.returncode == 0, flags.stderr
    binary = tmp_path_factory.mktemp("nats-c") / "stan_scenarios"
    command = [
        gcc,
        "-std=c99",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-O1",
        "-pthread",
        "-o",
        str(binary),
        str(SOURCE),
        *flags.stdout.split(),
    ]
    built = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, f"{' '.join(command)} failed:\n{built.stdout}{built.stderr}"
    return CClient(binary)
