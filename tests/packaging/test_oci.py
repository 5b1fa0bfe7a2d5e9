"""The container image (dist/stanpkg-VERSION-oci.tar), run for real: skopeo reads the
archive as an OCI image; umoci unpacks it into a runtime bundle whose process, user and
working directory come from the image's config; runc runs it with a host directory as
/data. A STAN client publishes through it, the image's own health check passes inside it,
and after a stop and a fresh start on the same volume the messages are still there."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.packaging.fixtures import ROOT, VERSION, dist_dir, need_tools

pytestmark = pytest.mark.slow
UID = 10001  # the image's stanpkg user
REF = f"stanpkg:{VERSION}"  # the image's name in the archive (podman load: localhost/stanpkg:V)


@pytest.fixture(scope="module")
def oci_archive() -> Path:
    if os.geteuid() != 0:
        pytest.skip("the OCI image is built as root (debootstrap, chroot)")
    return dist_dir() / f"stanpkg-{VERSION}-oci.tar"


@pytest.fixture(scope="module")
def layout(oci_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("oci-layout")
    with tarfile.open(oci_archive) as tar:
        tar.extractall(out, filter="data")
    return out


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()


def _config(layout: Path) -> dict[str, Any]:
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == REF
    manifest = json.loads(_blob(layout, entry["digest"]))
    config: dict[str, Any] = json.loads(_blob(layout, manifest["config"]["digest"]))
    return config


def test_every_blob_matches_its_digest(layout: Path) -> None:
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    blobs = list((layout / "blobs" / "sha256").iterdir())
    assert len(blobs) == 3  # one layer, its config, the manifest: nothing stale
    for blob in blobs:
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name


def test_skopeo_reads_the_image_config(oci_archive: Path) -> None:
    need_tools("skopeo")
    proc = subprocess.run(
        ["skopeo", "inspect", "--config", f"oci-archive:{oci_archive}:{REF}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads(proc.stdout)["config"]
    assert config["User"] == f"{UID}:{UID}"  # not root
    assert config["Entrypoint"] == ["/opt/stanpkg/bin/stanpkg", "run"]  # stanpkg run's flags
    assert config["Cmd"] == ["-sc", "/etc/stanpkg/stan.conf"]
    assert set(config["ExposedPorts"]) == {"4222/tcp", "8222/tcp", "6222/tcp"}
    assert set(config["Volumes"]) == {"/data"}


def test_the_health_check_asks_the_monitoring_endpoint(layout: Path) -> None:
    health = _config(layout)["config"]["Healthcheck"]
    assert health["Test"][0] == "CMD"
    assert "http://127.0.0.1:8222/streaming/serverz" in health["Test"][-1]
    assert health["Interval"] > 0 and health["Retries"] > 0


class Container:
    """One run of the image under runc, in a network namespace of its own."""

    def __init__(self, bundle: Path, netns: str, name: str) -> None:
        self.bundle, self.netns, self.name = bundle, netns, name
        self.log = bundle / f"{name}.log"

    def start(self) -> None:
        with self.log.open("ab") as log:
            subprocess.run(
                ["runc", "run", "--detach", "--bundle", str(self.bundle), self.name],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                check=True,
                timeout=60,
            )

    def exec(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runc", "exec", self.name, *argv], capture_output=True, text=True, timeout=30
        )

    def wait_healthy(self, health: list[str], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            probe = self.exec(health)
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"never healthy: {probe.stderr}\n{self.log.read_text()}")
            time.sleep(0.5)

    def client(self, *args: str) -> dict[str, Any]:
        proc = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                self.netns,
                sys.executable,
                "-m",
                "tests.packaging.stan_roundtrip",
                "nats://127.0.0.1:4222",
                "test-cluster",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr + self.log.read_text()
        result: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
        return result

    def stop(self) -> None:
        subprocess.run(["runc", "kill", self.name, "TERM"], capture_output=True, check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = subprocess.run(
                ["runc", "state", self.name], capture_output=True, text=True, check=False
            )
            if state.returncode != 0 or json.loads(state.stdout)["status"] == "stopped":
                break
            time.sleep(0.2)
        subprocess.run(["runc", "delete", "--force", self.name], capture_output=True)


@pytest.fixture
def bundle(layout: Path, tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    """The image unpacked by umoci (the runtime config made from the image config), with
    a host directory as /data and a network namespace of its own."""
    need_tools("umoci", "runc", "ip")
    path, volume = tmp_path / "bundle", tmp_path / "volume"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{REF}", str(path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    volume.mkdir()
    os.chown(volume, UID, UID)  # as a named volume would take /data's owner
    netns = f"stanpkg-oci-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    subprocess.run(["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"], check=True)
    spec = json.loads((path / "config.json").read_text())
    # This sandbox refuses setrlimit; a container engine would set the same limits.
    spec["process"].pop("rlimits", None)
    spec["process"]["terminal"] = False
    spec["linux"]["namespaces"] = [
        ns for ns in spec["linux"]["namespaces"] if ns["type"] != "network"
    ] + [{"type": "network", "path": f"/var/run/netns/{netns}"}]
    spec["mounts"].append(
        {"destination": "/data", "type": "bind", "source": str(volume), "options": ["rbind", "rw"]}
    )
    (path / "config.json").write_text(json.dumps(spec))
    try:
        yield path, netns, volume
    finally:
        subprocess.run(["ip", "netns", "delete", netns], check=False)


def test_the_image_serves_and_keeps_its_data_across_a_restart(
    layout: Path, bundle: tuple[Path, str, Path]
) -> None:
    path, netns, volume = bundle
    spec = json.loads((path / "config.json").read_text())
    # What umoci took from the image config: stanpkg run, as the stanpkg user, in /data.
    assert spec["process"]["args"] == [
        "/opt/stanpkg/bin/stanpkg",
        "run",
        "-sc",
        "/etc/stanpkg/stan.conf",
    ]
    assert (spec["process"]["user"]["uid"], spec["process"]["user"]["gid"]) == (UID, UID)
    assert spec["process"]["cwd"] == "/data"
    health = _config(layout)["config"]["Healthcheck"]["Test"][1:]

    name = f"stanpkg-{uuid.uuid4().hex[:8]}"
    first = Container(path, netns, name)
    first.start()
    try:
        first.wait_healthy(health)
        version = first.exec(["stanpkg", "--version"])
        assert version.stdout.splitlines()[-1] == "hot path: compiled (mypyc)", version.stdout
        assert first.client("oci.orders", "5")["ok"]
    finally:
        first.stop()
    # The store is in the volume, written by the image's user.
    store = volume / "datastore"
    assert (store / "oci.orders").is_dir()
    assert store.stat().st_uid == UID

    second = Container(path, netns, name + "-2")
    second.start()
    try:
        second.wait_healthy(health)
        result = second.client("oci.orders", "2", "--expect-stored", "5")
        assert result["replayed"] == [f"msg-{i}" for i in range(5)], result
        assert result["ok"], result
    finally:
        second.stop()
    with contextlib.suppress(FileNotFoundError):
        assert "Traceback" not in (path / f"{name}.log").read_text()


def test_the_compose_file_runs_a_valid_three_node_cluster() -> None:
    """packaging/oci/compose.yaml: three nodes of one cluster, each its own node ID with the
    two others as peers and routes, store and JetStream log in its own volume, and a
    configuration stanpkg accepts (validated here as `stanpkg run` would compile it)."""
    compose = yaml.safe_load((ROOT / "packaging" / "oci" / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"stan-a", "stan-b", "stan-c"}
    image_conf = str(ROOT / "packaging" / "oci" / "stan.conf")
    for name, service in services.items():
        node = name.removeprefix("stan-")
        args = service["command"]
        flag = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("-")}
        assert "-clustered" in args
        assert flag["-cluster_node_id"] == node
        assert sorted(flag["-cluster_peers"].split(",")) == sorted({"a", "b", "c"} - {node})
        assert flag["-cluster_log_path"].startswith("/data/")  # in the volume, as the store
        assert service["volumes"] == [f"{name}:/data"]
        assert service["image"] == f"localhost/stanpkg:{VERSION}"
        args = [image_conf if a == "/etc/stanpkg/stan.conf" else a for a in args]
        proc = subprocess.run(
            [sys.executable, "-m", "stanpkg.cli", "validate", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "RAFT_FILE store, clustered" in proc.stdout
