"""The embedded nats-server held between opening its client port and accepting on it
(transport/log_gate.py), on the real binary: while the streaming server connects, the port
takes connections and nats-server answers none; once it is let go it does."""

from __future__ import annotations

import socket
import sys
import threading

import pytest

from stanpkg.transport import EmbeddedNatsConfig, EmbeddedNatsServer
from stanpkg.transport.log_gate import padded_config_path
from stanpkg.transport.natsconf import logged_before_listening
from tests.transport.conftest import free_port
from tests.transport.test_embedded import Recorder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pipes")


def _answered(port: int, wait: float) -> bytes:
    """What nats-server sends a new connection within ``wait`` seconds (INFO, or nothing
    while it does not accept)."""
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
        sock.settimeout(wait)
        try:
            return sock.recv(4096)
        except TimeoutError:
            return b""


class HeldCheck:
    """An ``on_listening`` that looks at the port while nats-server is held."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, bytes, str]] = []
        self.connected = True

    def __call__(self, host: str, port: int) -> bool:
        listening = "listening" if _accepts(host, port) else "closed"
        self.calls.append(
            (port, _answered(port, 0.3) if listening == "listening" else b"", listening)
        )
        return self.connected


def _accepts(host: str, port: int) -> bool:
    for _ in range(2500):  # held after "Using configuration file", before listen(): briefly
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return True
        except ConnectionRefusedError:
            threading.Event().wait(0.0002)
    return False


@pytest.mark.parametrize(("monitored", "debug"), [(False, False), (True, False), (True, True)])
async def test_nats_server_accepts_nothing_until_the_streaming_server_connected(
    monitored: bool, debug: bool
) -> None:
    port = free_port()
    check = HeldCheck()
    config = EmbeddedNatsConfig(
        host="127.0.0.1", port=port, internal_monitor_port=-1 if monitored else 0, debug=debug
    )
    recorder = Recorder()
    server = EmbeddedNatsServer(
        config, on_log=recorder.on_log, on_exit=recorder.on_exit, on_listening=check
    )
    await server.start()
    try:
        # Called once, held: the port took the connection, nats-server sent it nothing.
        assert check.calls == [(port, b"", "listening")], recorder.lines
        assert _answered(port, 5.0).startswith(b"INFO ")  # let go: it accepts
        assert any(
            f"Listening for client connections on 127.0.0.1:{port}" in line
            for line in recorder.lines
        )
    finally:
        await server.stop()


async def test_a_callback_that_did_not_connect_is_called_again_on_the_listening_line() -> None:
    port = free_port()
    check = HeldCheck()
    check.connected = False
    recorder = Recorder()
    server = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=port),
        on_log=recorder.on_log,
        on_exit=recorder.on_exit,
        on_listening=check,
    )
    await server.start()
    try:
        assert [call[0] for call in check.calls] == [port, port]
        assert check.calls[1][1].startswith(b"INFO ")  # the second: no longer held
    finally:
        await server.stop()


async def test_a_random_port_is_not_held() -> None:
    """A client cannot race for a port it learns from the server's own output."""
    check = HeldCheck()
    recorder = Recorder()
    server = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=-1),
        on_log=recorder.on_log,
        on_exit=recorder.on_exit,
        on_listening=check,
    )
    await server.start()
    try:
        assert len(check.calls) == 1 and check.calls[0][1].startswith(b"INFO ")
    finally:
        await server.stop()


def test_the_padded_line_fills_its_page_leaving_room_for_the_monitor_line() -> None:
    """Arithmetic of the padding, for pids of 1 to 7 digits: the "Using configuration
    file" line ends within a page, with room for the expected lines and less than room
    for the "Listening" line after them."""
    config = EmbeddedNatsConfig(host="127.0.0.1", port=4222, internal_monitor_port=-1)
    expected = logged_before_listening(config)
    assert expected == ["Starting http monitor on 127.0.0.1:65535"]
    path = padded_config_path("/tmp/stanpkg-nats-x/nats-server.conf", expected)
    assert path.startswith("/tmp/stanpkg-nats-x/") and path.endswith("/nats-server.conf")
    assert path.replace("./", "").replace("//", "/") == "/tmp/stanpkg-nats-x/nats-server.conf"
    stamp = "2026/11/29 17:53:55.838769"
    digest = "(sha256:" + "0" * 64 + ")"
    for pid in ("7", "4194304"):
        prefix = f"[{pid}] {stamp} [INF] "
        using = f"{prefix}Using configuration file: {path} {digest}\n"
        monitor = f"{prefix}Starting http monitor on 127.0.0.1:8222\n"
        listening = f"{prefix}Listening for client connections on 127.0.0.1:4222\n"
        room = 4096 - len(using)
        assert len(monitor) <= room < len(monitor) + len(listening)
