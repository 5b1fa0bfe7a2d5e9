"""One node of the streaming service, assembled from the plan: ``run(plan)`` for
``stanpkg run`` / ``nats-streaming-server``.

This is the only module that knows every part: it builds the store, the NATS
connection settings, the embedded nats-server, the streaming server and the monitor,
and owns the process around them (signals, pid file, systemd notifications). The parts
below it know nothing of each other beyond their interfaces.

Startup follows the reference's log order (defaults.md §10): banner lines, store
creation, the embedded NATS server (its lines re-emitted through our logger), then
recovery and the limits printout (``StreamingServer.start``). Any failure after the
first log line prints ``[FTL] STREAM: Failed to start: <error>`` and exits 1.

The work follows another order, for a start in milliseconds with no moment when a
client could connect and not be answered: the embedded nats-server is started first
(its lines are held until the banner, which names its version), the server's
connections open the moment it accepts clients and hold the connect requests
(server/early.py), and only then is the rest of the server imported and built, its
store read, and the held requests answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import platform
import signal
import socket
import sys
from collections.abc import Coroutine
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stanpkg.monitor.config import monitor_config
from stanpkg.plan.compile import nats_cluster_name
from stanpkg.plan.model import Plan
from stanpkg.server.claim import (
    CLAIM_PATIENCE,
    CLAIMS,
    DiscoverClaim,
    claim_bytes,
    connect_claims,
)
from stanpkg.server.early import EarlyConnections, connection_policy, open_early
from stanpkg.server.errors import StartupError
from stanpkg.server.identity import STAN_VERSION, identity_line
from stanpkg.server.log import Logger
from stanpkg.server.modes import Standalone, mode_for
from stanpkg.server.modes.standalone import refuse_twin, twin_ping
from stanpkg.server.sd_notify import notify
from stanpkg.server.syslog import syslog_for
from stanpkg.stores.base import ServerInfo, StoreError
from stanpkg.transport.embedded import EmbeddedNatsConfig
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.errors import NatsError
from stanpkg.transport.nuid import next_nuid
from stanpkg.transport.supervised import SupervisedNatsServer
from stanpkg.transport.tls import tls_context_from_options

if TYPE_CHECKING:
    from stanpkg.monitor.service import MonitorServer
    from stanpkg.server.modes.base import ServingMode
    from stanpkg.server.monitoring_views import ServerView
    from stanpkg.server.server import StreamingServer

__all__ = [
    "GO_VERSION",
    "VERSION",
    "embedded_config",
    "nats_endpoint",
    "resolve_cluster_identity",
    "run",
]

VERSION = STAN_VERSION  # the reference release whose behaviour is implemented
GO_VERSION = f"python{platform.python_version()}"  # what the reference calls its Go version
_MONITOR_LINE = "Starting http monitor on "
# While nats-server starts: the thread that claims the port as it opens gets the
# interpreter within this many seconds, even while the loop thread works (default 5 ms).
_CLAIM_SWITCH_INTERVAL = 0.00005


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def run(plan: Plan) -> int:
    """Run the streaming server until SIGINT/SIGTERM (exit 0) or a fatal error (exit 1)."""
    try:
        syslog = syslog_for(plan)
    except (OSError, ValueError) as exc:  # the reference exits too
        Logger(logtime=plan.nats_server.logtime).fatal(
            f"Failed to start: error connecting to syslog: {exc}"
        )
        return 1
    log = Logger(
        log_file=plan.nats_server.log_file,
        logtime=plan.nats_server.logtime,
        debug=plan.stan_debug,
        trace=plan.stan_trace,
        syslog=syslog,
    )
    try:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            return runner.run(_Node(plan, log).run())
    finally:
        log.close()


_DEBUG_LEVEL = "[DBG] "


def _raft_debug_only(plan: Plan) -> bool:
    """The reference's ``raft_logging`` shows its Raft library's lines; a clustered node
    on JetStream shows the embedded nats-server's Raft and JetStream debug lines."""
    cluster = plan.cluster
    return cluster.clustered and cluster.raft_logging and not plan.nats_server.debug


def _is_raft_line(line: str) -> bool:
    return "RAFT" in line or "JetStream" in line


def embedded_config(plan: Plan) -> EmbeddedNatsConfig:
    """The embedded nats-server for ``plan``; a clustered node's runs JetStream (its
    state in the cluster log path, its name the node ID), and its NATS cluster needs a
    name for JetStream: the operator's, else one derived from the cluster ID."""
    ns = plan.nats_server
    cluster = plan.cluster
    clustered = cluster.clustered
    cluster_name = ns.cluster_name
    if clustered and not cluster_name and (ns.routes or ns.cluster_listen):
        cluster_name = nats_cluster_name(plan.cluster_id)
    # The streaming server owns the public monitoring port (stanpkg.monitor) and forwards
    # the NATS endpoints to nats-server's monitor on a private loopback port.
    monitored = bool(ns.http_port or ns.https_port)
    return EmbeddedNatsConfig(
        host=ns.host,
        port=ns.port,
        # A clustered node's also tells its serving node which clients are connected to
        # it (server/client_links.py).
        internal_monitor_port=-1 if monitored or clustered else 0,
        user=ns.user,
        password=ns.password.reveal(),
        token=ns.token.reveal(),
        tls_cert=ns.tls_cert,
        tls_key=ns.tls_key,
        tls_verify=ns.tls_verify,
        tls_ca_cert=ns.tls_ca_cert,
        routes=ns.routes,
        cluster_listen=ns.cluster_listen,
        cluster_name=cluster_name,
        debug=ns.debug or _raft_debug_only(plan),
        trace=ns.trace,
        passthrough=ns.passthrough,
        server_name=cluster.node_id if clustered else "",
        # The reference's default log path, relative to the working directory (which the
        # child shares); resolve_cluster_identity normally settles it first.
        jetstream_dir=(cluster.log_path or f"{plan.cluster_id}/{cluster.node_id}")
        if clustered
        else "",
        jetstream_sync_always=clustered and cluster.sync,
        memory_limit=ns.memory_limit,
    )


def nats_endpoint(plan: Plan, url: str) -> NatsEndpoint:
    """How the server connects to the NATS server at ``url``: the NATS server's own user
    (when embedded with authorization) else the streaming server's credentials."""
    ns = plan.nats_server
    return NatsEndpoint(
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


NODE_ID_FILE = "stanpkg-cluster-node-id"  # in the store directory


def resolve_cluster_identity(plan: Plan) -> Plan:
    """A clustered plan with its node ID and log path settled: the ID this node used
    before (kept in its store directory; once written the configured one is ignored, as
    the reference), else the configured one, else a new unique one."""
    cluster = plan.cluster
    if not cluster.clustered:
        return plan
    remembered = Path(plan.dir, NODE_ID_FILE) if plan.dir else None
    node_id = ""
    if remembered is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            node_id = remembered.read_text(encoding="utf-8").strip()
    node_id = node_id or cluster.node_id or next_nuid()
    if remembered is not None:
        remembered.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(remembered, "w", encoding="utf-8", opener=_private) as out:
            out.write(node_id + "\n")
    log_path = cluster.log_path or f"{plan.cluster_id}/{node_id}"
    return dataclasses.replace(
        plan, cluster=dataclasses.replace(cluster, node_id=node_id, log_path=log_path)
    )


LOG_PATH_LOCK = "stanpkg.lock"


def _private(path: str, flags: int) -> int:
    """Files of a node's store directories are 0600, as the FILE store's."""
    return os.open(path, flags, 0o600)


def lock_cluster_log_path(plan: Plan) -> object | None:
    """An exclusive lock on the node's cluster log path (its JetStream store): two nodes
    given the same path would corrupt each other's replicas. Held until the process
    exits; StartupError if another node holds it."""
    if not (plan.cluster.clustered and plan.embedded_nats and plan.cluster.log_path):
        return None
    try:
        import fcntl
    except ImportError:  # Windows: nats-server's own store-directory check remains
        return None
    path = Path(plan.cluster.log_path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)  # the JetStream store: private
    handle = open(path / LOG_PATH_LOCK, "a+b", opener=_private)  # noqa: SIM115 - kept open
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise StartupError(
            f'cluster log path "{plan.cluster.log_path}" is in use by another node'
        ) from None
    return handle


class _Node:
    def __init__(self, plan: Plan, log: Logger) -> None:
        self.plan = plan
        self.log = log
        self.nats: SupervisedNatsServer | None = None
        self.server: StreamingServer | None = None
        self.monitor: MonitorServer | None = None
        self.done: asyncio.Future[int]
        self._stepping_down: asyncio.Future[str]  # the current server lost the lease: why
        self._view: ServerView | None = None  # monitoring's, following the current server
        self._endpoint: NatsEndpoint | None = None
        self._nats_ready = asyncio.Event()
        self._log_path_lock: object | None = None
        self._held_lines: list[str] | None = []  # nats-server's, until our banner is out
        self._claims: list[DiscoverClaim] = []  # the discover subject, while starting
        # raft_logging: the embedded nats-server's debug lines, of its Raft groups only.
        self._raft_debug_only = _raft_debug_only(plan)
        self._mode: ServingMode  # the plan's, set as the node starts

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.done = loop.create_future()
        self._stepping_down = loop.create_future()
        server_id = next_nuid()
        self._install_signals(loop)
        code = await self._serve(loop.create_task(self._start(server_id)))
        self._print_banner(server_id)  # a stop before anything started
        await self._shutdown()
        return code

    def _print_banner(self, server_id: str) -> None:
        """The banner, once, then the nats-server lines held until it is out."""
        held = self._held_lines
        if held is None:
            return
        self._held_lines = None
        plan, log = self.plan, self.log
        log.notice(f"Starting nats-streaming-server[{plan.cluster_id}] version {VERSION}")
        nats_version = self.nats.version if self.nats is not None else ""
        log.notice(identity_line(embedded=plan.embedded_nats, nats_version=nats_version))
        log.notice(f"ServerID: {server_id}")
        log.notice(f"Go version: {GO_VERSION}")
        log.notice("Git commit: [not set]")
        for line in held:
            self._nats_log(line)

    async def _serve(self, starting: asyncio.Task[None]) -> int:
        """Run servers until the process stops; its exit code. A clustered node that
        loses the lease stops serving and stands by again with a new server, as the Go
        leader steps down: an exit would have the service manager restart it, and on a
        loaded cluster the next leader likewise, in a loop."""
        while True:
            stepping_down = self._stepping_down
            either: list[asyncio.Future[Any]] = [starting, self.done, stepping_down]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not starting.done() and self.server is not None and self.server.standing_by:
                # Stopped (or failed) while standing by: nothing to finish, the wait may last.
                starting.cancel()
            try:
                await starting
            except asyncio.CancelledError:
                if not (self.done.done() or stepping_down.done()):
                    raise
            except (StartupError, StoreError, NatsError, OSError) as exc:
                # A promotion the lease's loss cut short is a step-down, not a failure.
                if self.done.done() or not stepping_down.done():
                    self.log.fatal(f"Failed to start: {exc}")
                    return 1
            if not self.done.done() and not stepping_down.done():
                notify("READY=1", "STATUS=Streaming Server is ready")
            waiting: list[asyncio.Future[Any]] = [self.done, stepping_down]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not self.done.done():
                await self._step_down(stepping_down.result())
            if self.done.done():
                return self.done.result()
            starting = asyncio.get_running_loop().create_task(self._stand_by_again())

    async def _step_down(self, reason: str) -> None:
        """Stop the server as on a graceful stop (the lease is lost: nothing to release);
        the process and its nats-server go on. A stop of the process cuts this short."""
        self.log.error(f"{reason}; stepping down to follower")
        loop = asyncio.get_running_loop()
        if self.server is not None:
            stopping = loop.create_task(
                _stop_logged(self.server.stop(stepping_down=True), self.log)
            )
            either: list[asyncio.Future[Any]] = [stopping, self.done]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        gc.unfreeze()  # what the stopped server's start froze goes with it
        self._stepping_down = loop.create_future()

    async def _stand_by_again(self) -> None:
        """A new store and server from the same plan and mode: it contends again."""
        old = self.server
        assert old is not None and self._endpoint is not None
        server = self.server = self._new_server(old.mode, old.server_id, store_banner=False)
        server.start_time_ns, server.start_monotonic = old.start_time_ns, old.start_monotonic
        if self._view is not None:
            self._view.follow(server)
        self.log.notice("Stepped down to follower: standing by")
        await server.start(self._endpoint)

    def _new_server(
        self, mode: ServingMode, server_id: str, *, store_banner: bool = True
    ) -> StreamingServer:
        # The core and the stores are imported here, once the connections are open.
        from stanpkg.server.server import StreamingServer
        from stanpkg.stores.factory import create_store

        server: StreamingServer

        def lease_lost(reason: str) -> None:
            # The current server's only: a late word from a stopped one changes nothing.
            if server is self.server and not self._stepping_down.done():
                self._stepping_down.set_result(reason)

        server = StreamingServer(
            self.plan,
            create_store(self.plan, self.log),
            self.log,
            mode=mode,
            server_id=server_id,
            on_fatal=self._fatal,
            # A standby is a healthy service too: systemd's start job must not wait for
            # the active server to fail.
            on_standby=self._standing_by,
            on_step_down=lease_lost,
            store_banner=store_banner,
        )
        return server

    async def _start(self, server_id: str) -> None:
        log = self.log
        plan = self.plan = resolve_cluster_identity(self.plan)
        self._log_path_lock = lock_cluster_log_path(plan)
        if plan.nats_server.pid_file:
            Path(plan.nats_server.pid_file).write_text(f"{os.getpid()}", encoding="ascii")
        mode = self._mode = mode_for(plan)
        monitoring = monitor_config(plan)
        if monitoring is not None:
            # Monitoring reads the server from its first request: built before NATS.
            from stanpkg.monitor.service import MonitorServer  # loads aiohttp: only if used
            from stanpkg.server.monitoring_views import ServerView

            self.server = self._new_server(mode, server_id)
            self._view = ServerView(self.server)
            self.monitor = MonitorServer(
                self._view,
                monitoring,
                version=VERSION,
                go_version=GO_VERSION,
                log=log,
            )
            await self.monitor.start()
        try:
            url = await self._start_nats(mode) if plan.embedded_nats else plan.nats_server_url
            self._endpoint = nats_endpoint(plan, url)
            early = await self._open_early(mode, self._endpoint)
        finally:
            self._print_banner(server_id)
        if self.nats is not None:
            # Its output is read asynchronously: let its banner end before our next lines.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nats_ready.wait(), 2.0)
        elif self.monitor is not None:
            self.log.nats_line(self.monitor.listen_line)
        if plan.tls.skip_verify:
            log.warn(
                "TLS certificate chain and hostname will not be verified. DO NOT USE IN PRODUCTION!"
            )
        if self.server is None:
            self.server = self._new_server(mode, server_id)
        await self.server.start(self._endpoint, early)

    async def _start_nats(self, mode: ServingMode) -> str:
        """Start the embedded nats-server; its client URL once it accepts clients. A
        server that holds connect requests claims the discover subject the moment the
        port accepts (server/claim.py), from the thread that reads nats-server's
        "Listening" line (transport/embedded.py)."""
        plan = self.plan
        config = embedded_config(plan)
        payloads: list[bytes] = []
        probed = _probes(mode)
        if _holds_connects(plan, mode) and _claimable(plan):
            # The first claim probes for a twin; all hold the discover subject.
            auth = _claim_auth(nats_endpoint(plan, "nats://127.0.0.1"))
            for n in range(CLAIMS):
                probe = twin_ping(_discovery(plan)) if probed and not n else None
                inbox = f"_INBOX.{next_nuid()}"
                payloads.append(claim_bytes(_discovery(plan), probe, auth, inbox))
        loop = asyncio.get_running_loop()
        claimed: asyncio.Future[None] = loop.create_future()

        def adopt(socks: list[socket.socket]) -> None:
            self._claims = [
                DiscoverClaim.adopt(sock, probed=probed and not n) for n, sock in enumerate(socks)
            ]
            if not claimed.done():
                claimed.set_result(None)

        def on_listening(host: str, port: int) -> bool:
            # Any thread: connect and write now, hand the sockets to the loop. Held before
            # it accepts (log_gate.py), nats-server may not have opened the port yet.
            socks = connect_claims(host, port, payloads, within=CLAIM_PATIENCE)
            if socks:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                    loop.call_soon_threadsafe(adopt, socks)
            return bool(socks)

        self.nats = SupervisedNatsServer(
            config,
            on_log=self._nats_log,
            on_event=self._nats_event,
            on_restarted=self._nats_restarted,
            wanted=self._running,
            on_listening=on_listening if payloads else None,
        )
        switching = sys.getswitchinterval()
        if payloads:
            sys.setswitchinterval(_CLAIM_SWITCH_INTERVAL)
        try:
            await self.nats.start()
            if payloads:  # it accepts: the claims are connected or about to be
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(claimed), 1.0)
        finally:
            sys.setswitchinterval(switching)
        self._nats_restarted()
        return self.nats.client_url

    async def _open_early(self, mode: ServingMode, endpoint: NatsEndpoint) -> EarlyConnections:
        """The server's connections, holding connect requests if it serves at once."""
        plan = self.plan
        probe = _probes(mode)
        claims, self._claims = self._claims, []
        early = await open_early(
            endpoint,
            cluster_id=plan.cluster_id,
            discovery=_discovery(plan),
            options=connection_policy(plan),
            log=self.log,
            hold=_holds_connects(plan, mode),
            twin_check=partial(refuse_twin, discovery=_discovery(plan), cid=plan.cluster_id)
            if probe else None,
            claims=claims,
        )  # fmt: skip
        if probe and isinstance(mode, Standalone):
            mode.twin_ruled_out()
        return early

    @staticmethod
    def _standing_by() -> None:
        notify("READY=1", "STATUS=Standing by (fault-tolerant group)")

    def _nats_log(self, line: str) -> None:
        if line.endswith("Server is ready"):
            self._nats_ready.set()
        if self._held_lines is not None:
            self._held_lines.append(line)
            return
        if self._raft_debug_only and _DEBUG_LEVEL in line and not _is_raft_line(line):
            return  # raft_logging asked for JetStream's Raft lines, not all of NATS's
        if _MONITOR_LINE in line:
            if self.monitor is None:
                return  # a private monitor only (a clustered node's): not the operator's
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

    def _running(self) -> bool:
        return not self.done.done()

    def _nats_event(self, level: str, text: str) -> None:
        """The embedded nats-server died, or was started again (transport/supervised.py)."""
        if self.done.done() and self.done.result() == 0:
            return  # we are stopping: under systemd's control-group kill it gets SIGTERM too
        if level == "ERR":
            self.log.error(text)
        else:
            self.log.notice(text)

    def _nats_restarted(self) -> None:
        """Monitoring follows the current child: its private monitor port and its pid."""
        if self.nats is None:
            return
        self._mode.nats_monitor_port = self.nats.internal_monitor_port
        if self.monitor is not None:
            self.monitor.nats_monitor_port = self.nats.internal_monitor_port
            self.monitor.nats_server_pid = self.nats.pid

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


def _holds_connects(plan: Plan, mode: ServingMode) -> bool:
    """A server that serves at once holds the connect requests that come while it starts
    (server/early.py); a standby or follower answers none."""
    return isinstance(mode, Standalone) and not plan.partitioning


def _probes(mode: ServingMode) -> bool:
    return isinstance(mode, Standalone) and mode.probes_for_twin


def _discovery(plan: Plan) -> str:
    return ServerInfo.for_cluster(plan.cluster_id, plan.discover_prefix).discovery


def _claimable(plan: Plan) -> bool:
    """Whether the raw claim (server/claim.py) can speak to the embedded nats-server: in
    plain text, with a password or token if any (a nonce to sign needs its INFO)."""
    tls = plan.nats_server.tls_cert or plan.secure or plan.tls.client_cert
    return not (tls or plan.credentials or plan.nkey_seed_file)


def _claim_auth(endpoint: NatsEndpoint) -> dict[str, str]:
    if endpoint.user:
        return {"user": endpoint.user, "pass": endpoint.password}
    return {"auth_token": endpoint.token} if endpoint.token else {}


async def _stop_logged(stopping: Coroutine[Any, Any, None], log: Logger) -> None:
    """A stepping-down server's stop: a failure is logged (a stop cut short may leave
    parts of the server running), not raised into the node's own loop."""
    try:
        await stopping
    except Exception as exc:
        log.error(f"Error stepping down: {exc!r}")
