"""Fixtures for the transport tests: real nats-server processes on loopback, always reaped.

``async def`` tests are run here with ``asyncio.run`` under a hard timeout (no plugin
needed); tests that want uvloop take the ``loop_kind`` parameter.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stanpkg.transport import find_nats_server_binary
from tests.ports import free_port as free_port  # re-exported for the tests that import it here

ASYNC_TEST_TIMEOUT = 30.0


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    loop_factory = None
    if kwargs.get("loop_kind") == "uvloop":
        import uvloop

        loop_factory = uvloop.new_event_loop
    coro = asyncio.wait_for(pyfuncitem.obj(**kwargs), ASYNC_TEST_TIMEOUT)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(coro)
    return True


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@dataclass
class NatsProcess:
    """A nats-server started directly (not through EmbeddedNatsServer)."""

    proc: subprocess.Popen[bytes]
    port: int
    conf: Path
    log: Path

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


StartNats = Callable[..., NatsProcess]


@pytest.fixture
def start_nats(tmp_path: Path) -> Iterator[StartNats]:
    """``start_nats(extra_conf="", port=0)`` → a running nats-server; all killed at teardown."""
    binary = find_nats_server_binary()
    started: list[NatsProcess] = []

    def start(extra_conf: str = "", port: int = 0, timeout: float = 10.0) -> NatsProcess:
        index = len(started)
        ports_dir = tmp_path / f"ports{index}"
        ports_dir.mkdir()
        conf = tmp_path / f"nats{index}.conf"
        conf.write_text(
            f'host: "127.0.0.1"\nport: {port or -1}\nports_file_dir: "{ports_dir}"\n{extra_conf}\n'
        )
        log = tmp_path / f"nats{index}.log"
        with open(log, "wb") as log_fh:
            proc = subprocess.Popen(
                [binary, "-c", str(conf)], stdout=log_fh, stderr=subprocess.STDOUT
            )
        server = NatsProcess(proc, 0, conf, log)
        started.append(server)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in ports_dir.glob(f"*_{proc.pid}.ports"):
                with contextlib.suppress(ValueError, OSError):
                    ports: dict[str, Any] = json.loads(path.read_text())
                    server.port = int(ports["nats"][0].rsplit(":", 1)[1])
                    return server
            if proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {log.read_text()}")
            time.sleep(0.01)
        raise RuntimeError("nats-server did not start")

    yield start
    for server in started:
        server.kill()


@pytest.fixture
def nats_server(start_nats: StartNats) -> NatsProcess:
    return start_nats()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
