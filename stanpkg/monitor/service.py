"""The monitoring listener: one HTTP or HTTPS port (``-m``/``-ms``) owned by the
streaming server, serving :mod:`routes` with aiohttp.

It is bound before the embedded nats-server starts, so the port (possibly a random one)
is known when nats-server prints its "Starting http monitor on …" line, which the
node (:mod:`stanpkg.node`) rewrites to name this listener, in the same place of the
startup log as the reference's.
"""

from __future__ import annotations

import os
import socket
import ssl
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from aiohttp import web

from stanpkg.monitor.config import MonitorConfig, monitor_config
from stanpkg.monitor.proxy import NatsMonitorProxy
from stanpkg.monitor.routes import MonitorApp
from stanpkg.server.errors import StartupError

if TYPE_CHECKING:
    from stanpkg.server.log import Logger
    from stanpkg.server.monitoring_views import ServerView

__all__ = ["MonitorConfig", "MonitorServer", "monitor_config"]

_SHUTDOWN_TIMEOUT = 2.0


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _server_tls(config: MonitorConfig) -> ssl.SSLContext:
    # As nats-server's HTTPS monitor: its server certificate, no client certificate asked.
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_NONE
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"error loading the HTTPS monitoring certificate: {exc}") from exc
    return context


class MonitorServer:
    """``await start()`` binds and serves; ``stop()`` closes. ``nats_monitor_port`` is
    where the NATS endpoints are forwarded (None: answered 404, as with an external
    NATS server)."""

    def __init__(
        self,
        view: ServerView,
        config: MonitorConfig,
        *,
        version: str,
        go_version: str,
        log: Logger,
    ) -> None:
        self.config = config
        self.log = log
        self.proxy = NatsMonitorProxy()
        # One thread: concurrent scrapes queue up instead of taking more CPU from the
        # server.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stan-monitor")
        self._app = MonitorApp(
            view,
            version=version,
            go_version=go_version,
            executor=self._executor,
            log=log,
            proxy=self.proxy,
        )
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self.config.secure else "http"

    @property
    def listen_line(self) -> str:
        """nats-server's own wording for its monitoring listener."""
        return f"Starting {self.scheme} monitor on {_join_host_port(self.config.host, self.port)}"

    @property
    def nats_monitor_port(self) -> int | None:
        return self.proxy.port

    @nats_monitor_port.setter
    def nats_monitor_port(self, port: int | None) -> None:
        self.proxy.port = port

    @property
    def nats_server_pid(self) -> int | None:
        """The embedded nats-server's process: its memory and CPU go into /metrics."""
        return self._app.nats_server_pid

    @nats_server_pid.setter
    def nats_server_pid(self, pid: int | None) -> None:
        self._app.nats_server_pid = pid

    def _bind(self) -> socket.socket:
        config = self.config
        port = max(config.port, 0)
        try:
            return socket.create_server((config.host, port), backlog=128)
        except OSError as exc:
            # create_server() decorates strerror; Go prints the bare reason.
            reason = (os.strerror(exc.errno) if exc.errno else str(exc)).lower()
            address = _join_host_port(config.host, port)
            raise StartupError(
                f"can't listen to the monitor port: listen tcp {address}: bind: {reason}"
            ) from exc

    async def start(self) -> None:
        tls = _server_tls(self.config) if self.config.secure else None
        sock = self._bind()
        self.port = sock.getsockname()[1]
        runner = web.AppRunner(
            self._app.build(), access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT
        )
        try:
            await runner.setup()
            self._runner = runner
            await web.SockSite(runner, sock, ssl_context=tls).start()
        except BaseException:
            sock.close()
            raise

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.proxy.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
