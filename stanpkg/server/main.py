"""The server process: ``run(plan)`` for ``stanpkg run`` / ``nats-streaming-server``, and
``send_signal(command)`` for ``-sl``.

Startup follows the reference's log order (defaults.md §10): banner lines, store
creation, the embedded NATS server (its lines re-emitted through our logger), then
recovery and the limits printout (``StreamingServer.start``). Any failure after the
first log line prints ``[FTL] STREAM: Failed to start: <error>`` and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import signal
import sys
from pathlib import Path
from typing import Any

from stanpkg.monitor.service import MonitorServer, monitor_config
from stanpkg.plan.model import Plan
from stanpkg.server.errors import StartupError
from stanpkg.server.log import Logger
from stanpkg.server.sd_notify import notify
from stanpkg.server.server import StreamingServer
from stanpkg.stores.base import StoreError
from stanpkg.stores.factory import create_store
from stanpkg.transport.embedded import EmbeddedNatsConfig, EmbeddedNatsServer
from stanpkg.transport.errors import NatsError
from stanpkg.transport.nuid import next_nuid
from stanpkg.transport.tls import tls_context_from_options

__all__ = ["VERSION", "embedded_config", "run", "send_signal"]

VERSION = "0.25.6"  # the reference release whose behaviour is implemented
GO_VERSION = f"python{platform.python_version()}"  # what the reference calls its Go version
_MONITOR_LINE = "Starting http monitor on "


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def run(plan: Plan) -> int:
    """Run the streaming server until SIGINT/SIGTERM (exit 0) or a fatal error (exit 1)."""
    log = Logger(
        log_file=plan.nats_server.log_file,
        logtime=plan.nats_server.logtime,
        debug=plan.stan_debug,
        trace=plan.stan_trace,
    )
    try:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            return runner.run(_Process(plan, log).run())
    finally:
        log.close()


def embedded_config(plan: Plan) -> EmbeddedNatsConfig:
    ns = plan.nats_server
    # The streaming server owns the public monitoring port (stanpkg.monitor) and forwards
    # the NATS endpoints to nats-server's monitor on a private loopback port.
    monitored = bool(ns.http_port or ns.https_port)
    return EmbeddedNatsConfig(
        host=ns.host,
        port=ns.port,
        internal_monitor_port=-1 if monitored else 0,
        user=ns.user,
        password=ns.password.reveal(),
        token=ns.token.reveal(),
        tls_cert=ns.tls_cert,
        tls_key=ns.tls_key,
        tls_verify=ns.tls_verify,
        tls_ca_cert=ns.tls_ca_cert,
        routes=ns.routes,
        cluster_listen=ns.cluster_listen,
        cluster_name=ns.cluster_name,
        debug=ns.debug,
        trace=ns.trace,
        passthrough=ns.passthrough,
    )


class _Process:
    def __init__(self, plan: Plan, log: Logger) -> None:
        self.plan = plan
        self.log = log
        self.nats: EmbeddedNatsServer | None = None
        self.server: StreamingServer | None = None
        self.monitor: MonitorServer | None = None
        self.done: asyncio.Future[int]
        self._nats_ready = asyncio.Event()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.done = loop.create_future()
        plan, log = self.plan, self.log
        server_id = next_nuid()
        log.notice(f"Starting nats-streaming-server[{plan.cluster_id}] version {VERSION}")
        log.notice(f"ServerID: {server_id}")
        log.notice(f"Go version: {GO_VERSION}")
        log.notice("Git commit: [not set]")
        self._install_signals(loop)
        starting = loop.create_task(self._start(server_id))
        either: list[asyncio.Future[Any]] = [starting, self.done]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done() and self.server is not None and self.server.standing_by:
            # Stopped (or failed) while standing by: nothing to finish, the wait may last.
            starting.cancel()
        try:
            await starting
        except asyncio.CancelledError:
            if not self.done.done():
                raise
        except (StartupError, StoreError, NatsError, OSError) as exc:
            log.fatal(f"Failed to start: {exc}")
            await self._shutdown()
            return 1
        if not self.done.done():
            notify("READY=1", "STATUS=Streaming Server is ready")
        code = await self.done
        await self._shutdown()
        return code

    async def _start(self, server_id: str) -> None:
        plan, log = self.plan, self.log
        if plan.nats_server.pid_file:
            Path(plan.nats_server.pid_file).write_text(f"{os.getpid()}", encoding="ascii")
        store = create_store(plan, log)
        self.server = StreamingServer(
            plan,
            store,
            log,
            server_id=server_id,
            on_fatal=self._fatal,
            # A standby is a healthy service too: systemd's start job must not wait for
            # the active server to fail.
            on_standby=self._standing_by,
        )
        monitoring = monitor_config(plan)
        if monitoring is not None:
            self.monitor = MonitorServer(
                self.server, monitoring, version=VERSION, go_version=GO_VERSION, log=log
            )
            await self.monitor.start()
        if plan.embedded_nats:
            self.nats = EmbeddedNatsServer(
                embedded_config(plan), on_log=self._nats_log, on_exit=self._nats_exited
            )
            await self.nats.start()
            # Its output is read asynchronously: let its banner end before our next lines.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nats_ready.wait(), 2.0)
            url = self.nats.client_url
            if self.monitor is not None:
                self.monitor.nats_monitor_port = self.nats.internal_monitor_port
        else:
            url = plan.nats_server_url
            if self.monitor is not None:
                self.log.nats_line(self.monitor.listen_line)
        if plan.tls.skip_verify:
            log.warn(
                "TLS certificate chain and hostname will not be verified. DO NOT USE IN PRODUCTION!"
            )
        ns = plan.nats_server
        await self.server.start(
            url,
            user=ns.user or plan.username,
            password=ns.password.reveal() or plan.password.reveal(),
            token=ns.token.reveal() or plan.token.reveal(),
            credentials=plan.credentials,
            nkey_seed_file=plan.nkey_seed_file,
            tls=tls_context_from_options(plan.tls, secure=plan.secure),
            tls_required=plan.secure,
            tls_hostname=plan.tls.server_name,
        )

    @staticmethod
    def _standing_by() -> None:
        notify("READY=1", "STATUS=Standing by (fault-tolerant group)")

    def _nats_log(self, line: str) -> None:
        if line.endswith("Server is ready"):
            self._nats_ready.set()
        if self.monitor is not None and _MONITOR_LINE in line:
            # nats-server announces its private monitor; the public one is ours.
            line = line[: line.index(_MONITOR_LINE)] + self.monitor.listen_line
        # The child reads a generated file; report the configuration file the user gave.
        marker = "Using configuration file: "
        if marker in line:
            shown = self.plan.nats_server.config_file
            if not shown:
                return
            line = line[: line.index(marker) + len(marker)] + shown
        self.log.nats_line(line)

    def _nats_exited(self, code: int) -> None:
        if self.done.done() and self.done.result() == 0:
            return  # we are stopping: under systemd's control-group kill it gets SIGTERM too
        self._fatal(f"NATS server exited unexpectedly (exit status {code})")

    def _fatal(self, reason: str) -> None:
        self.log.fatal(reason)
        if not self.done.done():
            self.done.set_result(1)

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        def stop() -> None:
            if not self.done.done():
                self.done.set_result(0)

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, stop)
            loop.add_signal_handler(signal.SIGTERM, stop)
            loop.add_signal_handler(signal.SIGUSR1, self.log.reopen)
            loop.add_signal_handler(signal.SIGHUP, lambda: None)  # ignored, as the reference

    async def _shutdown(self) -> None:
        notify("STOPPING=1")
        if self.monitor is not None:  # first: no request may see a half-stopped server
            with contextlib.suppress(Exception):
                await self.monitor.stop()
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.stop()
        if self.nats is not None:
            with contextlib.suppress(Exception):
                await self.nats.stop()
        pid_file = self.plan.nats_server.pid_file
        if pid_file:
            with contextlib.suppress(OSError):
                os.unlink(pid_file)


# -- -sl: signal a running server ---------------------------------------------------------

_SIGNALS = {
    "stop": signal.SIGKILL,
    "quit": signal.SIGINT,
    "term": signal.SIGTERM,
    "reopen": signal.SIGUSR1,
    "reload": signal.SIGHUP,
    "ldm": signal.SIGUSR2,
}


def _running_servers() -> list[int]:
    """PIDs of other processes that look like a streaming server (Linux /proc)."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(entry.name)
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if pid == me or not argv:
            continue
        words = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
        if "nats-streaming-server" in words or ("stanpkg" in words and "run" in words):
            found.append(pid)
    return sorted(found)


def _resolve_pid(target: str) -> int:
    if target.isdigit():
        return int(target)
    try:
        text = Path(target).read_text(encoding="ascii").strip()
    except OSError as exc:
        raise ValueError(f"unable to read pid file {target}: {exc.strerror}") from None
    if not text.isdigit():
        raise ValueError(f"invalid pid in pid file {target}: {text!r}")
    return int(text)


def windows_service_target(command: str, platform: str = sys.platform) -> str:
    """On Windows ``-sl quit=<name>`` names a service (as nats-server's does), unless the
    target is a PID or an existing pid file; "" when the command is not for a service."""
    _, _, target = command.partition("=")
    target = target.strip()
    if platform != "win32" or not target or target.isdigit() or Path(target).is_file():
        return ""
    return target


def _signal_windows_service(command: str) -> int:
    try:
        from stanpkg_winsvc import winservice  # installed by the Chocolatey package
    except ImportError:
        print("the Windows service tools (stanpkg_winsvc) are not installed", file=sys.stderr)
        return 1
    try:
        winservice.send(command)
    except Exception as exc:  # pywin32 reports service manager errors as its own types
        print(f"unable to signal service: {exc}", file=sys.stderr)
        return 1
    return 0


def send_signal(command: str) -> int:
    """``-sl quit|stop|term|reopen|reload|ldm[=<pid, pid file or Windows service>]``;
    0 on success."""
    if windows_service_target(command):
        return _signal_windows_service(command)
    name, _, target = command.partition("=")
    sig = _SIGNALS.get(name.strip().lower())
    if sig is None:
        print(f'unknown signal "{name}"', file=sys.stderr)
        return 1
    try:
        if target:
            pid = _resolve_pid(target.strip())
        else:
            pids = _running_servers()
            if not pids:
                raise ValueError("no nats-streaming-server processes running")
            if len(pids) > 1:
                listed = "\n".join(str(p) for p in pids)
                raise ValueError(f"multiple nats-streaming-server processes running:\n{listed}")
            pid = pids[0]
        os.kill(pid, sig)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"unable to signal process {pid}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
