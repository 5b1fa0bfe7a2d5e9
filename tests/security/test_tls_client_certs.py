"""TLS with client certificates end to end: a real ``stanpkg run`` behind a nats-server
that verifies client certificates (embedded, then external), a STAN client with and
without a certificate."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.errors import Error as NatsPyError

from stanpkg.transport.tls import remote_alert_text
from tests.security.conftest import (
    StanpkgRun,
    client_cert_flags,
    client_tls,
    nats_tls_block,
    node_roundtrip,
    stan_roundtrip,
)
from tests.server.conftest import start_nats_process
from tests.transport.certs import CertSet

EXPECTED = [b"m0", b"m1", b"m2"]


def embedded_config(tmp_path: Path, certs: CertSet) -> Path:
    conf = tmp_path / "nats.conf"
    # "tls" at the top level belongs to the NATS server once a "streaming" block exists.
    conf.write_text(nats_tls_block(certs, verify=True) + "\nstreaming {\n  store: memory\n}\n")
    return conf


async def assert_refused_without_certificate(url: str, certs: CertSet) -> None:
    with pytest.raises((NatsPyError, OSError)):
        await stan_roundtrip(url, "any", tls=client_tls(certs, with_cert=False))


def embedded_tls_flags(certs: CertSet) -> list[str]:
    """The NATS server's TLS as flags instead of a configuration file."""
    return [
        "--tlsverify",
        "--tlscert",
        str(certs.server_cert),
        "--tlskey",
        str(certs.server_key),
        "--tlscacert",
        str(certs.ca),
    ]


@pytest.mark.parametrize("given_by", ["config", "flags"])
async def test_embedded_server_requires_client_certificates(
    run_stanpkg: type[StanpkgRun], certs: CertSet, tmp_path: Path, given_by: str
) -> None:
    nats_tls = (
        ["-c", str(embedded_config(tmp_path, certs))]
        if given_by == "config"
        else embedded_tls_flags(certs)
    )
    server = run_stanpkg("-p", "-1", *nats_tls, *client_cert_flags(certs))
    server.wait_ready()
    assert "TLS required for client connections" in server.log
    url = f"tls://127.0.0.1:{server.client_port}"
    got = await stan_roundtrip(url, server.cluster_id, tls=client_tls(certs, with_cert=True))
    assert got == EXPECTED
    await assert_refused_without_certificate(url, certs)


def test_node_client_with_a_client_certificate(
    run_stanpkg: type[StanpkgRun], certs: CertSet, tmp_path: Path, node_modules: Path
) -> None:
    server = run_stanpkg(
        "-p", "-1", "-c", str(embedded_config(tmp_path, certs)), *client_cert_flags(certs)
    )
    server.wait_ready()
    url = f"tls://127.0.0.1:{server.client_port}"
    files = {"ca": str(certs.ca), "cert": str(certs.client_cert), "key": str(certs.client_key)}
    report = node_roundtrip(url, server.cluster_id, tls=files)
    assert report == {"ok": True, "result": ["m0", "m1", "m2"]}
    refused = node_roundtrip(url, server.cluster_id, tls={"ca": str(certs.ca)})
    assert refused == {"ok": False, "error": "Server requires a client certificate."}


async def test_embedded_server_refuses_an_untrusted_client_certificate(
    run_stanpkg: type[StanpkgRun],
    certs: CertSet,
    rogue_client_cert: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    rogue_cert, rogue_key = (str(path) for path in rogue_client_cert)
    rogue = ["-tls_client_cert", rogue_cert, "-tls_client_key", rogue_key]
    server = run_stanpkg(
        "-p",
        "-1",
        "-c",
        str(embedded_config(tmp_path, certs)),
        *rogue,
        "-tls_client_cacert",
        str(certs.ca),
    )
    assert server.wait_exit() != 0
    assert "Failed to start: remote error: tls: unknown certificate authority" in server.log
    good = run_stanpkg(
        "-p", "-1", "-c", str(embedded_config(tmp_path, certs)), *client_cert_flags(certs)
    )
    good.wait_ready()
    tls = client_tls(certs, with_cert=False)
    tls.load_cert_chain(rogue_cert, rogue_key)
    with pytest.raises((NatsPyError, OSError)):
        await stan_roundtrip(f"tls://127.0.0.1:{good.client_port}", good.cluster_id, tls=tls)
    # The embedded nats-server's lines reach the log a moment after the client gave up.
    good.wait_for("TLS handshake error: tls: failed to verify certificate", timeout=10)


def test_embedded_server_refuses_stanpkg_without_its_certificate(
    run_stanpkg: type[StanpkgRun], certs: CertSet, tmp_path: Path
) -> None:
    server = run_stanpkg(
        "-p", "-1", "-c", str(embedded_config(tmp_path, certs)), "-tls_client_cacert", str(certs.ca)
    )
    assert server.wait_exit() != 0
    assert "TLS handshake error: tls: client didn't provide a certificate" in server.log
    # The Go client's words for the server's TLS alert, not a bare "connection closed".
    assert "[FTL] STREAM: Failed to start: remote error: tls: certificate required" in server.log
    assert "Streaming Server is ready" not in server.log


@pytest.fixture
def external_tls_nats(tmp_path: Path, certs: CertSet) -> Iterator[str]:
    proc, url = start_nats_process(tmp_path / "nats", nats_tls_block(certs, verify=True))
    yield url.replace("nats://", "tls://")
    proc.kill()
    proc.wait(10)


async def test_external_server_requires_client_certificates(
    external_tls_nats: str, run_stanpkg: type[StanpkgRun], certs: CertSet
) -> None:
    server = run_stanpkg("-ns", external_tls_nats, *client_cert_flags(certs))
    server.wait_ready()
    got = await stan_roundtrip(
        external_tls_nats, server.cluster_id, tls=client_tls(certs, with_cert=True)
    )
    assert got == EXPECTED
    await assert_refused_without_certificate(external_tls_nats, certs)
    without = run_stanpkg("-ns", external_tls_nats, "-tls_client_cacert", str(certs.ca))
    assert without.wait_exit() != 0
    assert "Failed to start: remote error: tls: certificate required" in without.log
    assert "Streaming Server is ready" not in without.log


def _ssl_error(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}] ...")
    exc.reason = reason
    return exc


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("TLSV13_ALERT_CERTIFICATE_REQUIRED", "remote error: tls: certificate required"),
        ("SSLV3_ALERT_BAD_CERTIFICATE", "remote error: tls: bad certificate"),
        ("TLSV1_ALERT_UNKNOWN_CA", "remote error: tls: unknown certificate authority"),
        ("TLSV1_ALERT_DECODE_ERROR", "remote error: tls: decode error"),  # unnamed: as is
        ("WRONG_VERSION_NUMBER", None),  # not an alert from the server
    ],
)
def test_server_alerts_in_the_go_clients_words(reason: str, text: str | None) -> None:
    assert remote_alert_text(_ssl_error(reason)) == text
    assert remote_alert_text(ConnectionResetError()) is None
