"""The server process (``run`` / ``send_signal``): startup log, files, signals, exits."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stanpkg.send_signal import send_signal
from stanpkg.server.sd_notify import notify
from tests.server.conftest import ROOT, new_cluster_id
from tests.server.stan_client import StanClient

RUNNER = (
    "import sys\n"
    "from stanpkg.plan.compile import compile_args\n"
    "from stanpkg.node import run\n"
    "sys.exit(run(compile_args(sys.argv[1:], env={}).plan))\n"
)
LINE = re.compile(r"^\[(\d+)\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} \[([A-Z]{3})\] (.*)$")


class ServerProcess:
    def __init__(
        self, *args: str, log_file: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.cluster_id = new_cluster_id()
        argv = ["-a", "127.0.0.1", "-p", "-1", "-cid", self.cluster_id, *args]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", RUNNER, *argv],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        self.log_file = log_file
        self.lines: list[str] = []

    def read_until(self, text: str, timeout: float = 15.0) -> list[str]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log_file is not None:
                if self.log_file.exists() and text in self.log_file.read_text():
                    return self.log_file.read_text().splitlines()
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
                continue
            raw = self.proc.stdout.readline()
            if not raw:
                break
            self.lines.append(raw.decode().rstrip("\n"))
            if text in self.lines[-1]:
                return self.lines
        raise AssertionError(f"{text!r} not seen; got:\n" + "\n".join(self.lines))

    def finish(self, timeout: float = 15.0) -> int:
        out, _ = self.proc.communicate(timeout=timeout)
        self.lines.extend(out.decode().splitlines())
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def servers() -> list[ServerProcess]:
    started: list[ServerProcess] = []
    yield started  # type: ignore[misc]
    for server in started:
        server.kill()


def _texts(lines: list[str]) -> list[tuple[str, str]]:
    out = []
    for line in lines:
        match = LINE.match(line)
        assert match is not None, f"not in the Go log format: {line!r}"
        assert int(match.group(1)) > 0
        out.append((match.group(2), match.group(3)))
    return out


def test_startup_log_and_graceful_stop(servers: list[ServerProcess]) -> None:
    server = ServerProcess("-mm", "5")
    servers.append(server)
    lines = server.read_until("Streaming Server is ready")
    texts = _texts(lines)
    pids = {LINE.match(line).group(1) for line in lines}  # type: ignore[union-attr]
    assert pids == {str(server.proc.pid)}  # NATS lines re-emitted under our pid
    stream = [text for level, text in texts if text.startswith("STREAM: ")]
    assert (
        stream[0] == f"STREAM: Starting nats-streaming-server[{server.cluster_id}] version 0.25.6"
    )
    assert re.fullmatch(
        r"STREAM: stanpkg version \S+, STAN protocol of nats-streaming-server 0\.25\.6, "
        r"nats-server \d+\.\d+\.\d+\S* \(embedded\)",
        stream[1],
    )
    assert (
        stream[2].startswith("STREAM: ServerID: ")
        and len(stream[2]) == len("STREAM: ServerID: ") + 22
    )
    assert stream[3].startswith("STREAM: Go version: ")
    assert stream[4] == "STREAM: Git commit: [not set]"
    assert stream[5:9] == [
        "STREAM: Recovering the state...",
        "STREAM: No recovered state",
        "STREAM: Message store is MEMORY",
        "STREAM: ---------- Store Limits ----------",
    ]
    assert "STREAM:   Messages     :             5" in stream
    assert stream[-1] == "STREAM: Streaming Server is ready"
    nats = [text for _, text in texts if not text.startswith("STREAM: ")]
    assert "Starting nats-server" in nats and "Server is ready" in nats
    # The embedded server's lines come between the banner and the recovery.
    order = [text for _, text in texts]
    assert order.index("Starting nats-server") < order.index("STREAM: Recovering the state...")
    assert order.index("Server is ready") < order.index("STREAM: Recovering the state...")
    started = len(lines)
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0
    # The reference's stop line, first of the stop.
    assert _texts(server.lines[started:])[0] == ("INF", "STREAM: Shutting down.")


def test_systemd_readiness_and_stopping_notifications(
    servers: list[ServerProcess], tmp_path: Path
) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(20)
        server = ServerProcess(env={"NOTIFY_SOCKET": str(path)})
        servers.append(server)
        assert sock.recv(4096) == b"READY=1\nSTATUS=Streaming Server is ready"
        server.read_until("Streaming Server is ready")
        server.proc.send_signal(signal.SIGTERM)
        assert sock.recv(4096) == b"STOPPING=1"
        assert server.finish() == 0


def test_notify_outside_systemd_and_to_a_vanished_manager(tmp_path: Path) -> None:
    assert notify("READY=1", environ={}) is False
    assert notify("READY=1", environ={"NOTIFY_SOCKET": "relative/path"}) is False
    assert notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}) is False
    name = f"stanpkg-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)  # the abstract namespace, as "@name"
        assert notify("READY=1", "STATUS=x", environ={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(100) == b"READY=1\nSTATUS=x"


def test_failed_to_start_external_nats_unreachable(servers: list[ServerProcess]) -> None:
    server = ServerProcess("-ns", "nats://127.0.0.1:1")
    servers.append(server)
    assert server.finish() == 1
    fatal = [text for level, text in _texts(server.lines) if level == "FTL"]
    assert fatal == ["STREAM: Failed to start: nats: no servers available for connection"]


def test_external_nats_server(servers: list[ServerProcess], nats_url: str) -> None:
    server = ServerProcess("-ns", nats_url, "-SD")
    servers.append(server)
    lines = server.read_until("Streaming Server is ready")
    assert not any("Starting nats-server" in line for line in lines)
    server.proc.send_signal(signal.SIGINT)
    assert server.finish() == 0


def test_log_file_pid_file_and_reopen(servers: list[ServerProcess], tmp_path: Path) -> None:
    log = tmp_path / "stan.log"
    pid_file = tmp_path / "stan.pid"
    server = ServerProcess("-l", str(log), "-P", str(pid_file), log_file=log)
    servers.append(server)
    server.read_until("Streaming Server is ready")
    assert pid_file.read_text().strip() == str(server.proc.pid)
    rotated = tmp_path / "stan.log.1"
    log.rename(rotated)
    assert send_signal(f"reopen={pid_file}") == 0
    server.read_until("File log re-opened")
    assert "Streaming Server is ready" in rotated.read_text()
    assert send_signal(f"quit={server.proc.pid}") == 0
    assert server.finish() == 0
    assert not pid_file.exists()


def _connect_and_close(url: str, cluster_id: str) -> None:
    async def go() -> None:
        client = await StanClient.connect(url, cluster_id, "dbg")
        await client.close()

    asyncio.run(go())


def test_stan_debug_flag(servers: list[ServerProcess], nats_url: str) -> None:
    server = ServerProcess("-ns", nats_url, "-SD")
    servers.append(server)
    server.read_until("Streaming Server is ready")
    _connect_and_close(nats_url, server.cluster_id)
    lines = server.read_until("[Client:dbg] Closed")
    assert any("[DBG] STREAM: [Client:dbg] Connected (Inbox=" in line for line in lines)
    server.proc.send_signal(signal.SIGTERM)
    assert server.finish() == 0

    quiet = ServerProcess("-ns", nats_url)
    servers.append(quiet)
    quiet.read_until("Streaming Server is ready")
    _connect_and_close(nats_url, quiet.cluster_id)
    quiet.proc.send_signal(signal.SIGTERM)
    assert quiet.finish() == 0
    assert not any("[DBG]" in line for line in quiet.lines)


def test_send_signal_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert send_signal("bogus") == 1
    assert 'unknown signal "bogus"' in capsys.readouterr().err
    assert send_signal(f"quit={tmp_path / 'missing.pid'}") == 1
    assert "unable to read pid file" in capsys.readouterr().err


async def test_fatal_when_connection_to_nats_is_lost_for_good(tmp_path: Path) -> None:
    from tests.server.conftest import make_plan, running, start_nats_process

    # Bounded on purpose: by default the server reconnects forever (tests/faults).
    plan = make_plan("--nats_max_reconnects", "2", "--nats_reconnect_wait", "50ms")
    proc, url = start_nats_process(tmp_path)
    fatal: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    try:
        async with running(plan, url) as (server, _):
            server.on_fatal = lambda reason: fatal.done() or fatal.set_result(reason)
            proc.kill()
            reason = await asyncio.wait_for(fatal, 10)
            assert reason.startswith("connection to NATS lost")
    finally:
        proc.kill()
        proc.wait(10)


def test_sl_names_a_windows_service_only_on_windows(tmp_path: Path) -> None:
    from stanpkg.send_signal import windows_service_target

    pid_file = tmp_path / "stan.pid"
    pid_file.write_text("123")
    assert windows_service_target("quit=stanpkg", "win32") == "stanpkg"
    assert windows_service_target("reopen=stan-eu", "win32") == "stan-eu"
    assert windows_service_target("quit=4242", "win32") == ""
    assert windows_service_target(f"quit={pid_file}", "win32") == ""
    assert windows_service_target("quit", "win32") == ""
    assert windows_service_target("quit=stanpkg", "linux") == ""
