"""A monitoring client that goes away before its answer (a health probe's timeout, a load
balancer's check) is not an error of the server: ``stanpkg run`` logs no traceback and no
error for it, and keeps answering."""

from __future__ import annotations

import json
import socket
import struct

from tests.monitor.conftest import MonitoredProcess

PATHS = ("/streaming/serverz", "/streaming/storez", "/streaming/channelsz", "/healthz")


def _ask_and_reset(port: int, path: str) -> None:
    """A request, then a reset (SO_LINGER 0) before the answer can be read."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


def test_clients_leaving_before_the_answer_log_nothing() -> None:
    proc = MonitoredProcess(("-m", "-1", "-SD"))
    try:
        proc.wait_for("Streaming Server is ready")
        port = proc.monitor_port
        for _ in range(100):
            for path in PATHS:
                _ask_and_reset(port, path)
        # Still serving, and every reset seen (debug lines) before the log is read.
        reply = proc.get("/streaming/serverz")
        assert reply.status == 200 and json.loads(reply.text)["cluster_id"] == proc.cluster_id
    finally:
        proc.stop()
    log = proc.log
    assert "Traceback" not in log, log[-4000:]
    assert "Error handling request" not in log, log[-4000:]
    assert not [line for line in proc.lines if "[ERR]" in line or "[WRN]" in line], log[-4000:]
