"""Fixtures for the streaming-server tests: a real nats-server shared by the session,
servers run in the test's event loop, clients over real NATS.

``async def`` tests run under ``asyncio.run`` with a hard timeout (no plugin needed);
``STANPKG_TEST_LOOP=uvloop`` runs them on uvloop, the loop the server uses in production.
Each test uses its own cluster ID, so servers of different tests never meet.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.server.log import Logger
from stanpkg.server.modes import mode_for
from stanpkg.server.server import StreamingServer
from stanpkg.stores.base import Store
from stanpkg.stores.memory import MemoryStore
from stanpkg.transport import find_nats_server_binary
from stanpkg.transport.endpoint import NatsEndpoint

ASYNC_TEST_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "js"

_cluster_ids = itertools.count(1)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    timeout = ASYNC_TEST_TIMEOUT
    marker = pyfuncitem.get_closest_marker("timeout")
    if marker is not None and marker.args:
        timeout = float(marker.args[0])
    coro = asyncio.wait_for(pyfuncitem.obj(**kwargs), timeout)
    loop_factory = None
    if os.environ.get("STANPKG_TEST_LOOP") == "uvloop":  # the production loop
        import uvloop

        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(coro)
    return True


def start_nats_process(tmp: Path, extra_conf: str = "") -> tuple[subprocess.Popen[bytes], str]:
    binary = find_nats_server_binary()
    ports_dir = tmp / "ports"
    ports_dir.mkdir(parents=True, exist_ok=True)
    conf = tmp / "nats.conf"
    conf.write_text(f'host: "127.0.0.1"\nport: -1\nports_file_dir: "{ports_dir}"\n{extra_conf}\n')
    log = open(tmp / "nats.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for path in ports_dir.glob(f"*_{proc.pid}.ports"):
            with contextlib.suppress(ValueError, OSError, KeyError, IndexError):
                ports: dict[str, Any] = json.loads(path.read_text())
                return proc, str(ports["nats"][0]).replace("0.0.0.0", "127.0.0.1")
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("nats-server did not start")


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = start_nats_process(tmp_path_factory.mktemp("nats"))
    yield url
    proc.kill()
    proc.wait(10)


def new_cluster_id() -> str:
    return f"test-{next(_cluster_ids)}-{time.monotonic_ns() % 100000}"


def make_plan(*args: str, cluster_id: str = "") -> Plan:
    argv = ["-cid", cluster_id or new_cluster_id(), *args]
    compiled = compile_args(argv, env={})
    assert compiled.plan is not None, (compiled.usage_error, compiled.diagnostics)
    return compiled.plan


class LogCapture(io.StringIO):
    def lines(self) -> list[str]:
        return self.getvalue().splitlines()

    def contains(self, text: str) -> bool:
        return text in self.getvalue()


@contextlib.asynccontextmanager
async def running(
    plan: Plan, url: str, *, store: Store | None = None, debug: bool = False
) -> AsyncIterator[tuple[StreamingServer, LogCapture]]:
    """A started server (memory store unless given) with its log captured."""
    capture = LogCapture()
    log = Logger(stream=capture, debug=debug, trace=False)
    store = store or MemoryStore(plan.store_limits, log)
    server = StreamingServer(plan, store, log, mode=mode_for(plan))
    await server.start(NatsEndpoint(url))
    try:
        yield server, capture
    finally:
        await server.stop()


def node_available() -> bool:
    return shutil.which("node") is not None and shutil.which("npm") is not None


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """``npm ci`` (or ``npm install``) into tests/js once per session."""
    if not node_available():
        pytest.skip("node/npm are not installed: the node-nats-streaming tests need them")
    marker = JS_DIR / "node_modules" / "node-nats-streaming" / "package.json"
    if not marker.exists():
        command = ["npm", "ci"] if (JS_DIR / "package-lock.json").exists() else ["npm", "install"]
        proc = subprocess.run(
            [*command, "--no-audit", "--no-fund"],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(command)} failed:\n{proc.stdout}\n{proc.stderr}")
    return JS_DIR / "node_modules"
