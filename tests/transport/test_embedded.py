"""The embedded nats-server process: config rendering, start/stop, ports, death, -t checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stanpkg.transport import (
    EmbeddedNatsConfig,
    EmbeddedNatsServer,
    NatsConnection,
    NatsServerNotFoundError,
    NatsServerStartError,
    check_config,
    find_nats_server_binary,
    split_log_line,
)
from stanpkg.transport.embedded import BINARY_ENV, remove_leftover_dirs
from stanpkg.transport.natsconf import render_config
from tests.transport.conftest import NatsProcess, free_port, pid_alive


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.exits: list[int] = []
        self.exited = asyncio.Event()

    def on_log(self, line: str) -> None:
        self.lines.append(line)

    def on_exit(self, code: int) -> None:
        self.exits.append(code)
        self.exited.set()


@contextlib.asynccontextmanager
async def embedded(
    config: EmbeddedNatsConfig, recorder: Recorder
) -> AsyncIterator[EmbeddedNatsServer]:
    server = EmbeddedNatsServer(config, on_log=recorder.on_log, on_exit=recorder.on_exit)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def http_get_json(port: int, path: str) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        data: dict[str, object] = json.load(response)
        return data


def test_find_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = find_nats_server_binary()
    assert os.access(path, os.X_OK) and Path(path).name.startswith("nats-server")
    monkeypatch.setenv(BINARY_ENV, str(tmp_path / "missing"))
    with pytest.raises(NatsServerNotFoundError, match="not an executable"):
        find_nats_server_binary()
    monkeypatch.setenv(BINARY_ENV, path)
    assert find_nats_server_binary() == path


async def test_start_random_port_and_stop() -> None:
    recorder = Recorder()
    config = EmbeddedNatsConfig(host="127.0.0.1", port=-1)
    async with embedded(config, recorder) as server:
        assert server.client_port > 0
        assert server.client_url == f"nats://127.0.0.1:{server.client_port}"
        assert server.monitor_port is None and server.internal_monitor_port is None
        pid = server.pid
        nc = await NatsConnection.connect(server.client_url)
        await nc.flush()
        await nc.close()
    assert not pid_alive(pid)
    assert recorder.exits == []  # stop() is not a death
    levels = {split_log_line(line)[0] for line in recorder.lines}
    assert "INF" in levels
    assert any("Server is ready" in line for line in recorder.lines)


async def test_starts_where_dev_stdout_does_not_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare chroot has no /dev or /proc: nats-server logs to its stdout as before, since it
    could not open the log file it would be given."""
    from stanpkg.transport import embedded as module

    monkeypatch.setattr(module, "_STDOUT_PATH", "/nonexistent/stdout")
    recorder = Recorder()
    async with embedded(EmbeddedNatsConfig(host="127.0.0.1", port=-1), recorder) as server:
        assert "logfile" not in server.config_text
        nc = await NatsConnection.connect(server.client_url)
        await nc.close()
    assert any("Server is ready" in line for line in recorder.lines)


def _child_environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().partition("=")[::2] for entry in raw if entry)


async def test_the_memory_limit_reaches_the_go_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """nats_memory_limit is the child's GOMEMLIMIT; one in our own environment wins."""
    monkeypatch.delenv("GOMEMLIMIT", raising=False)
    config = EmbeddedNatsConfig(host="127.0.0.1", port=-1, memory_limit=200 * 1024 * 1024)
    async with embedded(config, Recorder()) as server:
        assert _child_environment(server.pid)["GOMEMLIMIT"] == "209715200B"
    monkeypatch.setenv("GOMEMLIMIT", "1GiB")
    async with embedded(config, Recorder()) as server:
        assert _child_environment(server.pid)["GOMEMLIMIT"] == "1GiB"
    monkeypatch.delenv("GOMEMLIMIT")
    unlimited = EmbeddedNatsConfig(host="127.0.0.1", port=-1, memory_limit=0)
    async with embedded(unlimited, Recorder()) as server:
        assert "GOMEMLIMIT" not in _child_environment(server.pid)


async def test_all_interfaces_gives_loopback_url() -> None:
    recorder = Recorder()
    async with embedded(EmbeddedNatsConfig(host="0.0.0.0", port=-1), recorder) as server:
        assert server.client_url.startswith("nats://127.0.0.1:")


async def test_monitor_ports_public_and_internal() -> None:
    recorder = Recorder()
    public = EmbeddedNatsConfig(host="127.0.0.1", port=-1, http_port=-1)
    async with embedded(public, recorder) as server:
        assert server.monitor_port and server.internal_monitor_port is None
        assert "server_id" in http_get_json(server.monitor_port, "/varz")
    internal_port = free_port()
    internal = EmbeddedNatsConfig(host="0.0.0.0", port=-1, internal_monitor_port=internal_port)
    async with embedded(internal, recorder) as server:
        assert server.internal_monitor_port == internal_port and server.monitor_port is None
        varz = http_get_json(internal_port, "/varz")
        assert varz["http_host"] == "127.0.0.1"
        assert "connections" in http_get_json(internal_port, "/connz")


async def test_auth_and_passthrough_are_applied() -> None:
    recorder = Recorder()
    config = EmbeddedNatsConfig(
        host="127.0.0.1",
        port=-1,
        user="u",
        password='p"w\\d',
        passthrough="max_payload: 2048\nmax_connections: 10",
    )
    async with embedded(config, recorder) as server:
        nc = await NatsConnection.connect(server.client_url, user="u", password='p"w\\d')
        assert nc.max_payload == 2048
        await nc.close()
        with pytest.raises(Exception, match="authorization violation"):
            await NatsConnection.connect(server.client_url, user="u", password="x")


async def test_unexpected_death_calls_on_exit() -> None:
    recorder = Recorder()
    server = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=-1),
        on_log=recorder.on_log,
        on_exit=recorder.on_exit,
    )
    await server.start()
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(recorder.exited.wait(), 5)
    assert recorder.exits == [-signal.SIGKILL]
    await server.stop()  # harmless afterwards
    assert recorder.exits == [-signal.SIGKILL]


async def test_port_in_use_fails_start_with_server_text(nats_server: NatsProcess) -> None:
    recorder = Recorder()
    server = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=nats_server.port),
        on_log=recorder.on_log,
        on_exit=recorder.on_exit,
    )
    with pytest.raises(NatsServerStartError, match="address already in use"):
        await server.start(timeout=5)
    assert recorder.exits == []


async def test_bad_passthrough_fails_start() -> None:
    recorder = Recorder()
    server = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=-1, passthrough="no_such_option: 1"),
        on_log=recorder.on_log,
        on_exit=recorder.on_exit,
    )
    with pytest.raises(NatsServerStartError) as err:
        await server.start(timeout=5)
    line = server.config_text.splitlines().index("no_such_option: 1") + 1
    assert str(err.value) == f'nats-server.conf:{line}:1: unknown field "no_such_option"'


def test_check_config() -> None:
    assert check_config("port: 4222\nmax_payload: 1MB\n") == []
    errors = check_config("port: 4222\nwhat_is_this: 1\n", display_name="stan.conf")
    assert errors == ['stan.conf:2:1: unknown field "what_is_this"']
    assert check_config("port: {\n")  # a parse error


def test_render_config() -> None:
    config = EmbeddedNatsConfig(
        host="0.0.0.0",
        port=4222,
        https_port=8443,
        token="tok",
        tls_cert="/c.pem",
        tls_key="/k.pem",
        tls_verify=True,
        tls_ca_cert="/ca.pem",
        routes=("nats://a:6222", "nats://b:6222"),
        cluster_listen="nats://ruser:rpass@0.0.0.0:6222",
        cluster_name="c1",
        debug=True,
        trace=True,
        passthrough="accounts { A: {} }",
        internal_monitor_port=9000,
    )
    text = render_config(config, ports_file_dir="/tmp/x")
    for expected in (
        'host: "0.0.0.0"',
        "port: 4222",
        'http: "127.0.0.1:9000"',
        'https: "0.0.0.0:8443"',
        'token: "tok"',
        "verify: true",
        'ca_file: "/ca.pem"',
        'routes: ["nats://a:6222", "nats://b:6222"]',
        'listen: "0.0.0.0:6222"',
        'user: "ruser"',
        'name: "c1"',
        "debug: true",
        "trace: true",
        'ports_file_dir: "/tmp/x"',
    ):
        assert expected in text, expected
    assert text.rstrip().endswith("accounts { A: {} }")
    assert check_config(text.replace("/c.pem", "").replace("/k.pem", "")) != []  # sanity
    with pytest.raises(ValueError, match="http_port"):
        render_config(
            EmbeddedNatsConfig(host="h", port=1, http_port=8222, internal_monitor_port=-1)
        )
    assert "port: -1" in render_config(EmbeddedNatsConfig(host="h", port=0))


def test_rendered_config_is_accepted_by_nats_server(tmp_path: Path) -> None:
    config = EmbeddedNatsConfig(
        host="127.0.0.1",
        port=-1,
        http_port=-1,
        user="a",
        password="b",
        routes=("nats://127.0.0.1:6999",),
        cluster_listen="127.0.0.1:-1",
        cluster_name="test",
        passthrough="max_payload: 2MB",
    )
    assert check_config(render_config(config, ports_file_dir=str(tmp_path))) == []


def test_split_log_line() -> None:
    line = "[123] 2026/11/22 08:14:46.844024 [INF]   Version:  2.15.1"
    assert split_log_line(line) == ("INF", "  Version:  2.15.1")
    assert split_log_line("garbage") == ("", "garbage")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_nats_server_dies_with_its_parent(tmp_path: Path) -> None:
    _kill_a_parent_of_nats_server(tmp_path, tmp_path)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_nats_server_shuts_down_gracefully_when_its_parent_dies(tmp_path: Path, loop: str) -> None:
    """SIGTERM, not SIGKILL, at the parent's death, and no SIGPIPE from its log lines
    (the parent's end of the pipe is gone): nats-server runs its whole shutdown, which
    hands its JetStream leaderships over and, last, removes its ports file. Killed by a
    signal, it would leave the ports file behind. (uvloop, the node's loop, gives its
    children socket pairs, not pipes, unless told otherwise.)"""
    _kill_a_parent_of_nats_server(tmp_path, tmp_path, loop)
    (left,) = (p for p in tmp_path.iterdir() if p.name.startswith("stanpkg-nats-"))
    assert not list(left.glob("*.ports")), "nats-server did not finish a graceful shutdown"


def _kill_a_parent_of_nats_server(tmp_path: Path, tmpdir: Path, loop: str = "asyncio") -> None:
    """A stanpkg-like parent (its temporary files in ``tmpdir``, its event loop ``loop``)
    killed with SIGKILL: its nats-server dies with it."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import asyncio\n"
        "from stanpkg.transport import EmbeddedNatsConfig, EmbeddedNatsServer\n"
        "async def main():\n"
        "    s = EmbeddedNatsServer(EmbeddedNatsConfig(host='127.0.0.1', port=-1),\n"
        "                           on_log=lambda l: None, on_exit=lambda c: None)\n"
        "    await s.start()\n"
        "    print(s.pid, flush=True)\n"
        "    await asyncio.sleep(60)\n"
        + ("import uvloop\nuvloop.run(main())\n" if loop == "uvloop" else "asyncio.run(main())\n")
    )
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait(5)
        deadline = time.monotonic() + 5
        while pid_alive(child) and not _is_zombie(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_alive(child) or _is_zombie(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def test_directories_of_killed_servers_are_removed_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed stanpkg leaves its nats-server's directory (config and ports file) behind;
    the next embedded start removes it, and its own directory goes at its stop."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    _kill_a_parent_of_nats_server(tmp_path, tmpdir)
    (left,) = tmpdir.iterdir()
    assert left.name.startswith("stanpkg-nats-")
    # nats-server's ports file went with its graceful shutdown (SIGTERM at our death, see
    # the test below); our file naming its pid stays and tells it gone.
    assert {p.suffix for p in left.iterdir()} == {".conf", ".pid"}
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    async with embedded(EmbeddedNatsConfig(host="127.0.0.1", port=-1), Recorder()) as server:
        (own,) = tmpdir.iterdir()
        assert own != left
        # The start ends at nats-server's "Listening" line; it writes its ports file after.
        ports = own / f"nats-server_{server.pid}.ports"
        for _ in range(500):
            if ports.exists():
                break
            await asyncio.sleep(0.01)
        assert ports.exists()
    assert list(tmpdir.iterdir()) == []


def test_leftover_directories_rules(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()

    def made(name: str, *files: str, age: float = 0) -> Path:
        path = tmp_path / name
        path.mkdir()
        for file in files:
            (path / file).write_text("x")
        os.utime(path, (time.time() - age, time.time() - age))
        return path

    dead = made("stanpkg-nats-dead", "nats-server.conf", f"nats-server_{gone.pid}.ports")
    live = made("stanpkg-nats-live", "nats-server.conf", f"nats-server_{os.getpid()}.ports")
    starting = made("stanpkg-nats-starting", "nats-server.conf", age=60)
    unstarted = made("stanpkg-nats-unstarted", "nats-server.conf", age=3600)
    other = made("other-dead", f"nats-server_{gone.pid}.ports", age=3600)
    (tmp_path / "stanpkg-nats-file").write_text("not a directory")
    removed = remove_leftover_dirs(str(tmp_path), time.time())
    assert sorted(removed) == sorted([str(dead), str(unstarted)])
    assert not dead.exists() and not unstarted.exists()
    assert live.exists() and starting.exists() and other.exists()
    assert (tmp_path / "stanpkg-nats-file").exists()
