"""Fixtures for the monitoring tests: ``stanpkg run`` processes with a monitoring port,
an HTTP helper, STAN clients on a background event loop, and an in-process server with
its monitor for the edge cases that need many objects quickly."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import http.client
import re
import ssl
import sys
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import pytest

from stanpkg.monitor.service import MonitorConfig, MonitorServer
from stanpkg.node import GO_VERSION, VERSION
from stanpkg.plan.model import Plan
from stanpkg.server.monitoring_views import ServerView
from stanpkg.server.server import StreamingServer
from tests.log_lines import LineReadingProcess
from tests.server.conftest import (  # noqa: F401 - fixtures and the async-test hook
    ROOT,
    nats_url,
    new_cluster_id,
    pytest_pyfunc_call,
    running,
)

T = TypeVar("T")

RUNNER = (
    "import sys\n"
    "from stanpkg.plan.compile import compile_args\n"
    "from stanpkg.node import run\n"
    "sys.exit(run(compile_args(sys.argv[1:], env={}).plan))\n"
)
_MONITOR_LINE = re.compile(r"\[INF\] Starting (https?) monitor on (\S+):(\d+)$")
_CLIENT_LINE = re.compile(r"\[INF\] Listening for client connections on (\S+):(\d+)$")
_SERVER_ID = re.compile(r"\[INF\] STREAM: ServerID: (\S+)$")


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode()


def http_request(
    port: int,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    tls: ssl.SSLContext | None = None,
) -> Reply:
    """One request to 127.0.0.1:<port> (blocking: for servers in other processes)."""
    if tls is not None:
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            "127.0.0.1", port, context=tls, timeout=30
        )
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


async def async_request(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> Reply:
    """For a monitor running in the test's own event loop."""
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.request(method, url, headers=headers) as resp,
    ):
        body = await resp.read()
        if resp.headers.get("Content-Encoding") == "gzip":  # aiohttp asks for it
            body = gzip.decompress(body)
        return Reply(resp.status, {k.lower(): v for k, v in resp.headers.items()}, body)


@dataclass
class MonitoredProcess(LineReadingProcess):
    """A ``stanpkg run`` process; log lines collected by a reader thread."""

    args: tuple[str, ...]
    cluster_id: str = field(default_factory=new_cluster_id)

    def __post_init__(self) -> None:
        argv = ["-a", "127.0.0.1", "-p", "-1", "-cid", self.cluster_id, *self.args]
        super().__init__([sys.executable, "-c", RUNNER, *argv], cwd=ROOT)

    def _find(self, pattern: re.Pattern[str]) -> re.Match[str]:
        for line in self.lines:
            match = pattern.search(line)
            if match:
                return match
        raise AssertionError(f"no line matches {pattern.pattern}; log:\n" + "\n".join(self.lines))

    @property
    def monitor_port(self) -> int:
        return int(self._find(_MONITOR_LINE).group(3))

    @property
    def monitor_scheme(self) -> str:
        return self._find(_MONITOR_LINE).group(1)

    @property
    def nats_url(self) -> str:
        match = self._find(_CLIENT_LINE)
        return f"nats://127.0.0.1:{match.group(2)}"

    @property
    def server_id(self) -> str:
        return self._find(_SERVER_ID).group(1)

    def get(self, path: str, **kwargs: Any) -> Reply:
        return http_request(self.monitor_port, path, **kwargs)


class ClientLoop:
    """An event loop in a thread, for STAN clients that must stay connected (and answer
    heartbeats) while synchronous tests query the server."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def monitor_of(server: StreamingServer, config: MonitorConfig | None = None) -> MonitorServer:
    """The monitor of an in-process server, as the node builds it (not started); by default
    on a free loopback port."""
    return MonitorServer(
        ServerView(server),
        config or MonitorConfig("127.0.0.1", 0),
        version=VERSION,
        go_version=GO_VERSION,
        log=server.log,
    )


@contextlib.asynccontextmanager
async def monitored(plan: Plan, url: str) -> AsyncIterator[tuple[StreamingServer, str]]:
    """An in-process server (memory store) with its monitor on a free loopback port;
    yields the server and the monitor's base URL."""
    async with running(plan, url) as (server, _log):
        monitor = monitor_of(server)
        await monitor.start()
        try:
            yield server, f"http://127.0.0.1:{monitor.port}"
        finally:
            await monitor.stop()


# -- the scripted scenario, shared by the endpoint and metrics tests ------------------------


@dataclass
class ScenarioRun:
    proc: MonitoredProcess
    expected: Any  # tests.monitor.scenario.Expected


@pytest.fixture(scope="session")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    from tests.monitor import scenario as script

    conf = tmp_path_factory.mktemp("scenario") / "stan.conf"
    conf.write_text(script.CONFIG)
    proc = MonitoredProcess(("-sc", str(conf), "-m", "-1"))
    clients = ClientLoop()
    try:
        proc.wait_for("Streaming Server is ready")
        expected = clients.run(script.run(proc.nats_url, proc.cluster_id))
        yield ScenarioRun(proc, expected)
        clients.run(script.close_clients(expected))
    finally:
        clients.close()
        proc.stop()
