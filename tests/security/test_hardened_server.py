"""One server with everything on: its NATS port requires TLS with client certificates
and a password, its monitoring is HTTPS only. Clients need both; monitoring needs the CA
(no client certificate, as nats-server's own HTTPS monitor); plain HTTP is refused."""

from __future__ import annotations

import json
import re
import ssl
from pathlib import Path

import pytest
from nats.errors import Error as NatsPyError

from tests.monitor.conftest import http_request
from tests.security.conftest import (
    StanpkgRun,
    client_cert_flags,
    client_tls,
    nats_tls_block,
    stan_roundtrip,
)
from tests.transport.certs import CertSet

PASSWORD = "pw-MARKER-hardened-3e9d"
_HTTPS_MONITOR = re.compile(r"Starting https monitor on 127\.0\.0\.1:(\d+)")


@pytest.fixture
def hardened(run_stanpkg: type[StanpkgRun], certs: CertSet, tmp_path: Path) -> StanpkgRun:
    conf = tmp_path / "nats.conf"
    conf.write_text(
        nats_tls_block(certs, verify=True)
        + f'\nauthorization {{\n  user: stan\n  password: "{PASSWORD}"\n}}\n'
        + f'streaming {{\n  username: stan\n  password: "{PASSWORD}"\n}}\n'
    )
    server = run_stanpkg(
        "-p",
        "-1",
        "-ms",
        "-1",
        "-c",
        str(conf),
        *client_cert_flags(certs),
    )
    server.wait_ready()
    return server


async def test_clients_need_certificate_and_password(hardened: StanpkgRun, certs: CertSet) -> None:
    url = f"tls://127.0.0.1:{hardened.client_port}"
    with_cert = client_tls(certs, with_cert=True)
    got = await stan_roundtrip(
        url, hardened.cluster_id, tls=with_cert, user="stan", password=PASSWORD
    )
    assert got == [b"m0", b"m1", b"m2"]
    with pytest.raises((NatsPyError, OSError)):
        await stan_roundtrip(url, "any", tls=with_cert, user="stan", password="wrong")
    with pytest.raises((NatsPyError, OSError)):
        await stan_roundtrip(
            url, "any", tls=client_tls(certs, with_cert=False), user="stan", password=PASSWORD
        )
    assert PASSWORD not in hardened.log


def test_monitoring_is_https_only(hardened: StanpkgRun, certs: CertSet) -> None:
    match = _HTTPS_MONITOR.search(hardened.log)
    assert match is not None, hardened.log
    port = int(match.group(1))
    trusted = ssl.create_default_context(cafile=str(certs.ca))
    serverz = http_request(port, "/streaming/serverz", tls=trusted)
    assert serverz.status == 200
    assert json.loads(serverz.text)["cluster_id"] == hardened.cluster_id
    metrics = http_request(port, "/metrics", tls=trusted)
    assert metrics.status == 200 and "nss_server_info{" in metrics.text
    varz = http_request(port, "/varz", tls=trusted)  # nats-server's, proxied over HTTPS
    assert varz.status == 200 and json.loads(varz.text)["tls_verify"] is True
    for reply in (serverz, metrics, varz):
        assert PASSWORD not in reply.text
    with pytest.raises(ssl.SSLError):  # the server's certificate is checked by clients
        http_request(port, "/metrics", tls=ssl.create_default_context(cafile=str(certs.other_ca)))
    with pytest.raises(ConnectionError):  # plain HTTP is not answered on the HTTPS port
        http_request(port, "/streaming/serverz")
