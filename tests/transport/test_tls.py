"""TLS to nats-server with throwaway certificates, and the Go client's error texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.plan.model import TlsOptions
from stanpkg.transport import (
    NatsConnection,
    NatsError,
    SecureConnectionWantedError,
    TlsConfigError,
    build_tls_context,
    tls_context_from_options,
)
from tests.transport.certs import CertSet, make_certs
from tests.transport.conftest import NatsProcess, StartNats


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_block(certs: CertSet, verify: bool) -> str:
    lines = [
        "tls {",
        f'  cert_file: "{certs.server_cert}"',
        f'  key_file: "{certs.server_key}"',
        f'  ca_file: "{certs.ca}"',
    ]
    if verify:
        lines.append("  verify: true")
    lines.append("}")
    return "\n".join(lines)


async def test_tls_server_with_ca(start_nats: StartNats, certs: CertSet, loop_kind: str) -> None:
    server = start_nats(tls_block(certs, verify=False))
    ctx = build_tls_context(ca_file=str(certs.ca))
    nc = await NatsConnection.connect(server.url, tls=ctx)
    got: list[bytes] = []
    nc.subscribe("secure", lambda s, r, p: got.append(p))
    nc.publish("secure", b"over tls")
    await nc.flush()
    assert got == [b"over tls"]
    assert nc.server_info.get("tls_required") is True
    await nc.close()


async def test_tls_verify_requires_client_certificate(
    start_nats: StartNats, certs: CertSet
) -> None:
    server = start_nats(tls_block(certs, verify=True))
    with_cert = build_tls_context(
        ca_file=str(certs.ca), cert_file=str(certs.client_cert), key_file=str(certs.client_key)
    )
    nc = await NatsConnection.connect(server.url, tls=with_cert)
    await nc.flush()
    await nc.close()
    with pytest.raises(NatsError):
        await NatsConnection.connect(server.url, tls=build_tls_context(ca_file=str(certs.ca)))


async def test_untrusted_server_certificate(start_nats: StartNats, certs: CertSet) -> None:
    server = start_nats(tls_block(certs, verify=False))
    with pytest.raises(NatsError, match="tls: failed to verify certificate"):
        await NatsConnection.connect(server.url, tls=build_tls_context(ca_file=str(certs.other_ca)))
    # A server that requires TLS upgrades a plain client (system trust store: fails too).
    with pytest.raises(NatsError, match="tls: failed to verify certificate"):
        await NatsConnection.connect(server.url)
    skip = build_tls_context(skip_verify=True)
    nc = await NatsConnection.connect(server.url, tls=skip)
    await nc.close()


async def test_server_name_for_verification(start_nats: StartNats, certs: CertSet) -> None:
    server = start_nats(tls_block(certs, verify=False))
    ctx = build_tls_context(ca_file=str(certs.ca))
    nc = await NatsConnection.connect(server.url, tls=ctx, tls_hostname="localhost")
    await nc.close()
    with pytest.raises(NatsError, match="tls: failed to verify certificate"):
        await NatsConnection.connect(server.url, tls=ctx, tls_hostname="not-the-server")


async def test_tls_required_but_server_is_plain(nats_server: NatsProcess) -> None:
    with pytest.raises(
        SecureConnectionWantedError, match=r"^nats: secure connection not available$"
    ):
        await NatsConnection.connect(nats_server.url, tls_required=True)
    with pytest.raises(SecureConnectionWantedError):
        await NatsConnection.connect(f"tls://127.0.0.1:{nats_server.port}")


def test_missing_client_certificate_file(certs: CertSet, tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(TlsConfigError) as err:
        build_tls_context(cert_file=str(missing), key_file=str(certs.client_key))
    assert str(err.value) == (
        f"nats: error loading client certificate: open {missing}: no such file or directory"
    )
    with pytest.raises(TlsConfigError, match=r"^nats: error loading client certificate: "):
        build_tls_context(cert_file=str(certs.ca), key_file=str(certs.server_key))
    with pytest.raises(TlsConfigError, match=r"^nats: error loading or parsing rootCA file: open"):
        build_tls_context(ca_file=str(missing))


def test_context_from_plan_options(certs: CertSet) -> None:
    none = TlsOptions(
        client_cert="", client_key="", client_ca="", server_name="", skip_verify=False
    )
    assert tls_context_from_options(none, secure=False) is None
    assert tls_context_from_options(none, secure=True) is not None
    full = TlsOptions(
        client_cert=str(certs.client_cert),
        client_key=str(certs.client_key),
        client_ca=str(certs.ca),
        server_name="localhost",
        skip_verify=True,
    )
    ctx = tls_context_from_options(full, secure=False)
    assert ctx is not None and ctx.check_hostname is False
