"""The monitoring listener: HTTPS, an external NATS server, and startup errors."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import pytest

from stanpkg.monitor.service import MonitorConfig, monitor_config
from stanpkg.server.errors import StartupError
from tests.monitor.conftest import MonitoredProcess, http_request, monitor_of
from tests.server.conftest import make_plan, running
from tests.transport.certs import make_certs


def test_https_with_a_test_certificate(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    proc = MonitoredProcess(
        (
            "--tls",
            "--tlscert",
            str(certs.server_cert),
            "--tlskey",
            str(certs.server_key),
            "-tls_client_cacert",
            str(certs.ca),
            "-ms",
            "-1",
        )
    )
    try:
        proc.wait_for("Streaming Server is ready")
        assert proc.monitor_scheme == "https"
        trusted = ssl.create_default_context(cafile=str(certs.ca))
        reply = http_request(proc.monitor_port, "/streaming/serverz", tls=trusted)
        assert reply.status == 200
        assert json.loads(reply.text)["cluster_id"] == proc.cluster_id
        varz = http_request(proc.monitor_port, "/varz", tls=trusted)  # proxied over HTTPS
        assert varz.status == 200 and "server_id" in json.loads(varz.text)
        metrics = http_request(proc.monitor_port, "/metrics", tls=trusted)
        assert "nss_server_info{" in metrics.text
        # The certificate is checked by clients: an untrusted CA fails the handshake.
        untrusted = ssl.create_default_context(cafile=str(certs.other_ca))
        with pytest.raises(ssl.SSLError):
            http_request(proc.monitor_port, "/streaming/serverz", tls=untrusted)
        with pytest.raises((ConnectionError, OSError)):  # plain HTTP is not served
            reply = http_request(proc.monitor_port, "/streaming/serverz")
            assert reply.status >= 400
            raise ConnectionError
    finally:
        assert proc.stop() == 0


def test_external_nats_server(nats_url: str) -> None:
    """With ``-ns`` there is no embedded nats-server: the streaming server still serves
    its endpoints, logs the listener itself, and NATS paths answer 404."""
    proc = MonitoredProcess(("-ns", nats_url, "-m", "-1"))
    try:
        proc.wait_for("Streaming Server is ready")
        assert any(
            line.endswith(f"[INF] Starting http monitor on 127.0.0.1:{proc.monitor_port}")
            for line in proc.lines
        )
        serverz = proc.get("/streaming/serverz")
        assert json.loads(serverz.text)["state"] == "STANDALONE"
        varz = proc.get("/varz")
        assert (varz.status, varz.text) == (404, "404 page not found\n")
    finally:
        assert proc.stop() == 0


def test_monitor_port_in_use_fails_the_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = MonitoredProcess(("-m", str(port)))
        assert proc.proc.wait(20) == 1
        proc.stop()
    expected = (
        f"[FTL] STREAM: Failed to start: can't listen to the monitor port: "
        f"listen tcp 127.0.0.1:{port}: bind: address already in use"
    )
    assert any(line.endswith(expected) for line in proc.lines), proc.lines


def test_monitor_config_follows_nats_server_rules() -> None:
    assert monitor_config(make_plan()) is None
    assert monitor_config(make_plan("-m", "8222", "-a", "10.1.2.3")) == MonitorConfig(
        "10.1.2.3", 8222
    )
    with pytest.raises(StartupError, match=r"can't specify both HTTP \(8222\) and HTTPs \(8223\)"):
        monitor_config(make_plan("-m", "8222", "-ms", "8223"))
    with pytest.raises(StartupError, match="TLS cert and key required for HTTPS"):
        monitor_config(make_plan("-ms", "8223"))


def test_monitor_host_of_the_nats_configuration(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text('http: "127.0.0.1:8333"\nstreaming { id: mon }\n')
    assert monitor_config(make_plan("-c", str(conf))) == MonitorConfig("127.0.0.1", 8333)
    conf.write_text('http_host: "10.0.0.7"\nhttp_port: 8334\nstreaming { id: mon }\n')
    assert monitor_config(make_plan("-c", str(conf), "-a", "10.1.2.3")) == MonitorConfig(
        "10.0.0.7", 8334
    )
    conf.write_text("http: 8335\nstreaming { id: mon }\n")  # a port only: the -a address
    assert monitor_config(make_plan("-c", str(conf), "-a", "10.1.2.3")) == MonitorConfig(
        "10.1.2.3", 8335
    )


def test_https_uses_the_nats_configuration_tls_block(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(
        'https: 8443\ntls {\n  cert_file: "/etc/c.pem"\n  key_file: "/etc/k.pem"\n}\n'
        "streaming { id: tlsconf }\n"
    )
    config = monitor_config(make_plan("-c", str(conf)))
    assert config == MonitorConfig("0.0.0.0", 8443, "/etc/c.pem", "/etc/k.pem")


async def test_bad_certificate_is_a_startup_error(nats_url: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    async with running(make_plan(), nats_url) as (server, _log):
        monitor = monitor_of(server, MonitorConfig("127.0.0.1", 0, missing, missing))
        with pytest.raises(StartupError, match="HTTPS monitoring certificate"):
            await monitor.start()
        await monitor.stop()
