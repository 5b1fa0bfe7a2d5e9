"""Real ``stanpkg run`` processes, throwaway certificates and a STAN client on nats-py
for the end-to-end security tests."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from stanpkg.proto import protocol_pb2 as pb
from tests.server.conftest import (  # noqa: F401 - the async test runner, npm ci once
    new_cluster_id,
    node_modules,
    pytest_pyfunc_call,
)
from tests.server.stan_client import StanClient
from tests.transport.certs import CertSet, _ca, _leaf, _write_key, make_certs
from tests.transport.test_tls import tls_block

STANPKG = Path(sys.executable).with_name("stanpkg")
_CLIENT_PORT = re.compile(r"Listening for client connections on ([\d.]+):(\d+)")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def rogue_client_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A client certificate and key from a CA the servers do not trust."""
    directory = tmp_path_factory.mktemp("rogue")
    ca_key, ca_cert = _ca("rogue CA")
    key, cert = _leaf(ca_key, ca_cert, "rogue", ExtendedKeyUsageOID.CLIENT_AUTH)
    cert_path, key_path = directory / "rogue-cert.pem", directory / "rogue-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, key_path)
    return cert_path, key_path


def nats_tls_block(certs: CertSet, *, verify: bool) -> str:
    """A nats-server ``tls`` block with the throwaway server certificate."""
    return tls_block(certs, verify)


def client_tls(certs: CertSet, *, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if with_cert:
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return ctx


def client_cert_flags(certs: CertSet) -> list[str]:
    """stanpkg's own client certificate flags."""
    return [
        "-tls_client_cert",
        str(certs.client_cert),
        "-tls_client_key",
        str(certs.client_key),
        "-tls_client_cacert",
        str(certs.ca),
    ]


class StanpkgRun:
    """``stanpkg run ARGS`` as a child process, its log in a file."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.cluster_id = new_cluster_id()
        self.log_path = tmp / f"{self.cluster_id}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.argv = [str(STANPKG), "run", "-a", "127.0.0.1", "-cid", self.cluster_id, *args]
        self.proc = subprocess.Popen(self.argv, cwd=tmp, stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not in the log of {self.argv}:\n{self.log}")

    def wait_ready(self) -> None:
        self.wait_for("STREAM: Streaming Server is ready")

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout)

    @property
    def client_port(self) -> int:
        match = _CLIENT_PORT.search(self.log)
        assert match is not None, self.log
        return int(match.group(2))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture
def run_stanpkg(tmp_path: Path) -> Iterator[type[StanpkgRun]]:
    started: list[StanpkgRun] = []

    class Tracked(StanpkgRun):
        def __init__(self, *args: str) -> None:
            super().__init__(tmp_path, *args)
            started.append(self)

    yield Tracked  # type: ignore[misc]
    for server in started:
        server.stop()


async def stan_roundtrip(url: str, cluster_id: str, **nats_options: object) -> list[bytes]:
    """Connect as a STAN client with ``nats_options``, publish three messages, subscribe
    from the start and return what arrived."""
    nc = await nats.connect(
        url,
        allow_reconnect=False,
        connect_timeout=3,
        **nats_options,  # type: ignore[arg-type]
    )
    try:
        client = await StanClient.connect(url, cluster_id, "secure-client", nc=nc)
        for i in range(3):
            await client.publish("secured", f"m{i}".encode())
        sub = await client.subscribe("secured", start=pb.First)
        got = [m.data for m in await sub.collect(3)]
        await client.close(keep_nats=True)
        return got
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


NODE_CLIENT = Path(__file__).with_name("secure_client.js")


def node_roundtrip(url: str, cluster_id: str, **options: object) -> dict[str, object]:
    """The real node-nats-streaming client: publish three, receive them from the start.
    ``options``: user, pass, token, tls={ca, cert, key} (file paths)."""
    payload = json.dumps({"url": url, "cluster": cluster_id, **options})
    proc = subprocess.run(
        ["node", str(NODE_CLIENT), payload], capture_output=True, text=True, timeout=30
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output from the node client: {proc.stderr}"
    report: dict[str, object] = json.loads(lines[-1])
    return report
