"""``-r/--remote_syslog`` and ``-s/--syslog``: the real ``stanpkg run`` process logging to a
syslog listener the test opens (UDP, TCP, unix datagram), in the Go server's format."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stanpkg.server.syslog import LOCAL_SYSLOG_PATHS, parse_remote_syslog, syslog_tag
from tests.server.conftest import ROOT, new_cluster_id

STANPKG = Path(sys.executable).parent / "stanpkg"
# Go's log/syslog, network form: <PRI>RFC3339 HOSTNAME TAG[PID]: MESSAGE
REMOTE = re.compile(r"^<(\d+)>(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) (\S+) (\S+)\[(\d+)\]: (.*)$")
# Local form: <PRI>Mmm dd hh:mm:ss TAG[PID]: MESSAGE (the day padded with a space)
LOCAL = re.compile(r"^<(\d+)>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (\S+)\[(\d+)\]: (.*)$")
NOTICE, KERN, DAEMON = 5, 0, 3 << 3


class Listener:
    """Collects syslog messages from one socket in a thread."""

    def __init__(self, sock: socket.socket, stream: bool) -> None:
        self.sock = sock
        self.stream = stream
        self.messages: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def _add(self, data: bytes) -> None:
        with self._cond:
            self.messages.append(data.decode())
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            if not self.stream:
                while True:
                    self._add(self.sock.recv(65536))
            conn, _ = self.sock.accept()
            with conn, conn.makefile("rb") as lines:
                for line in lines:  # Go frames a stream with newlines
                    self._add(line)
        except OSError:
            return

    def wait_for(self, text: str, timeout: float = 20.0) -> list[str]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(text in message for message in self.messages):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{text!r} not received; got {self.messages!r}")
                self._cond.wait(left)
            return list(self.messages)


def _udp() -> tuple[Listener, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return Listener(sock, stream=False), f"udp://127.0.0.1:{sock.getsockname()[1]}"


def _tcp() -> tuple[Listener, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return Listener(sock, stream=True), f"tcp://127.0.0.1:{sock.getsockname()[1]}"


def _unix_dgram(path: Path) -> Listener:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    return Listener(sock, stream=False)


def _start(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    argv = [*prefix, str(STANPKG), "run", "-a", "127.0.0.1", "-p", "-1"]
    argv += ["-cid", new_cluster_id(), *args]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _stop(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out.decode()
    return out.decode()


def _remote_fields(messages: list[str], pid: int) -> list[tuple[int, str, str]]:
    fields = []
    for message in messages:
        assert message.endswith("\n"), message
        match = REMOTE.match(message.rstrip("\n"))
        assert match is not None, f"not in Go's syslog format: {message!r}"
        assert match.group(3) == socket.gethostname()
        assert int(match.group(5)) == pid
        fields.append((int(match.group(1)), match.group(4), match.group(6)))
    return fields


@pytest.mark.slow
@pytest.mark.parametrize("network", ["udp", "tcp"])
def test_remote_syslog_gets_the_log_with_priorities_and_tag(
    procs: list[subprocess.Popen[bytes]], network: str
) -> None:
    listener, url = _udp() if network == "udp" else _tcp()
    proc = _start("-r", url, "--syslog_name", "stan-east")
    procs.append(proc)
    listener.wait_for("STREAM: Streaming Server is ready")
    out = _stop(proc)
    messages = listener.wait_for("STREAM: Shutting down.")
    fields = _remote_fields(messages, proc.pid)
    assert {tag for _, tag, _ in fields} == {"stan-east"}
    texts = [text for _, _, text in fields]
    assert texts[0].startswith("STREAM: Starting nats-streaming-server[")
    assert "Server is ready" in texts  # the embedded nats-server's lines too
    # Info lines are notices; remotely the facility is Go's zero (kern).
    priority = {text: pri for pri, _, text in fields}
    assert priority["STREAM: Streaming Server is ready"] == KERN | NOTICE
    assert "[INF]" not in out and "Streaming Server is ready" not in out  # nothing on stdout


@pytest.mark.slow
def test_remote_syslog_unix_datagram_socket_and_default_tag(
    procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    path = tmp_path / "log.sock"
    listener = _unix_dgram(path)
    proc = _start("-r", f"unix://{path}")
    procs.append(proc)
    listener.wait_for("STREAM: Streaming Server is ready")
    _stop(proc)
    fields = _remote_fields(listener.wait_for("STREAM: Shutting down."), proc.pid)
    assert {tag for _, tag, _ in fields} == {"stanpkg"}  # the executable's name, as Go


def test_unreachable_tcp_syslog_is_fatal_at_start(procs: list[subprocess.Popen[bytes]]) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    proc = _start("-r", f"tcp://127.0.0.1:{port}")
    procs.append(proc)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "[FTL] STREAM: Failed to start: error connecting to syslog:" in out.decode()


def test_bad_remote_syslog_url_is_fatal_at_start(procs: list[subprocess.Popen[bytes]]) -> None:
    proc = _start("-r", "http://127.0.0.1:514")
    procs.append(proc)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "network must be udp, tcp or unix" in out.decode()


def test_log_file_wins_over_syslog(procs: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    listener, url = _udp()
    log_file = tmp_path / "server.log"
    proc = _start("-r", url, "-l", str(log_file))
    procs.append(proc)
    deadline = time.monotonic() + 20
    while "Streaming Server is ready" not in (log_file.read_text() if log_file.exists() else ""):
        assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
        time.sleep(0.05)
    _stop(proc)
    assert listener.messages == []


_UNSHARE = shutil.which("unshare")


def _can_unshare() -> bool:
    if _UNSHARE is None:
        return False
    probe = subprocess.run([_UNSHARE, "-rm", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_unshare(), reason="needs user and mount namespaces")
def test_local_syslog_uses_the_daemon_socket(
    procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """-s: the local daemon's socket, found as Go finds it. In a private mount namespace
    the test's socket is bound over /var/run/log (one of the paths Go tries)."""
    sock_path = tmp_path / "devlog.sock"
    listener = _unix_dgram(sock_path)
    run_dir = os.path.realpath("/var/run")
    setup = (
        f"mount -t tmpfs tmpfs {run_dir} && touch {run_dir}/log && "
        f'mount --bind {sock_path} {run_dir}/log && exec "$@"'
    )
    proc = _start("-s", prefix=(str(_UNSHARE), "-rm", "sh", "-c", setup, "sh"))
    procs.append(proc)
    listener.wait_for("STREAM: Streaming Server is ready")
    _stop(proc)
    messages = listener.wait_for("STREAM: Shutting down.")
    for message in messages:
        match = LOCAL.match(message.rstrip("\n"))
        assert match is not None, f"not in Go's local syslog format: {message!r}"
        assert match.group(2) == "stanpkg"
    ready = next(m for m in messages if m.endswith("STREAM: Streaming Server is ready\n"))
    assert ready.startswith(f"<{DAEMON | NOTICE}>")


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def test_no_local_syslog_daemon_is_fatal_at_start(
    procs: list[subprocess.Popen[bytes]],
) -> None:
    if any(_is_socket(path) for path in LOCAL_SYSLOG_PATHS):
        pytest.skip("this host runs a syslog daemon")
    proc = _start("-s")
    procs.append(proc)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "error connecting to syslog: no local syslog daemon" in out.decode()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("udp://127.0.0.1", "expected udp://host:port"),
        ("tcp://:514", "expected tcp://host:port"),
        ("tcp://host:99999", "Port out of range"),
        ("unix://", "expected unix:///path"),
        ("http://host:514", "network must be udp, tcp or unix"),
        ("localhost:514", "network must be udp, tcp or unix"),
    ],
)
def test_bad_remote_syslog_urls(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_remote_syslog(url)


def test_good_remote_syslog_urls() -> None:
    assert parse_remote_syslog("udp://localhost:514") == (("localhost", 514), socket.SOCK_DGRAM)
    assert parse_remote_syslog("tcp://[::1]:601") == (("::1", 601), socket.SOCK_STREAM)
    assert parse_remote_syslog("unix:///dev/log") == ("/dev/log", None)


def test_syslog_tag() -> None:
    assert syslog_tag("east", "/usr/bin/stanpkg") == "east"
    assert syslog_tag("", "/usr/bin/nats-streaming-server") == "nats-streaming-server"
    assert syslog_tag("", "-c") == "stanpkg"
