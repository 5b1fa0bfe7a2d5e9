"""The container image (dist/stanpkg-VERSION-oci.tar), run for real: skopeo reads the
archive as an OCI image; umoci unpacks it into a runtime bundle whose process, user and
working directory come from the image's config; runc runs it with a host directory as
/data. A STAN client publishes through it, the image's own health check passes inside it,
and after a stop and a fresh start on the same volume the messages are still there.
Arguments given to the image add to its configuration; it runs as an arbitrary user of
group 0; a /data it may not enter stops it with the reason, not a traceback."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
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
ENTRYPOINT = "/usr/local/bin/stanpkg-entrypoint"  # packaging/oci/entrypoint.sh
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
    # stanpkg run -sc /etc/stanpkg/stan.conf, and the arguments after it: no Cmd that
    # arguments would replace.
    assert config["Entrypoint"] == [ENTRYPOINT]
    assert not config.get("Cmd")
    assert set(config["ExposedPorts"]) == {"4222/tcp", "8222/tcp", "6222/tcp"}
    assert set(config["Volumes"]) == {"/data"}


def test_the_health_check_asks_the_monitoring_endpoint(layout: Path) -> None:
    health = _config(layout)["config"]["Healthcheck"]
    assert health["Test"][0] == "CMD"
    assert "http://127.0.0.1:8222/streaming/serverz" in health["Test"][-1]
    assert health["Interval"] > 0 and health["Retries"] > 0


class Container:
    """One run of the image under runc, in a network namespace of its own."""

    def __init__(
        self, bundle: Path, netns: str, name: str, cluster_id: str = "test-cluster"
    ) -> None:
        self.bundle, self.netns, self.name = bundle, netns, name
        self.cluster_id = cluster_id
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
                self.cluster_id,
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

    def status(self) -> str:
        state = subprocess.run(
            ["runc", "state", self.name], capture_output=True, text=True, check=False
        )
        return str(json.loads(state.stdout)["status"]) if state.returncode == 0 else "gone"

    def wait_stopped(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.status() not in ("stopped", "gone"):
            assert time.monotonic() < deadline, f"still running:\n{self.log.read_text()}"
            time.sleep(0.2)

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
    # As a new named volume takes the image's /data: its owner, group and mode.
    shutil.copytree(path / "rootfs" / "data", volume, symlinks=True)
    image_data = (path / "rootfs" / "data").stat()
    os.chown(volume, image_data.st_uid, image_data.st_gid)
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
    assert spec["process"]["args"] == [ENTRYPOINT]
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


def _set_process(path: Path, args: list[str] | None = None, uid: int = UID, gid: int = UID) -> None:
    """The container's arguments (as `podman run IMAGE ARGS` gives them: after the
    entry point) and user (`--user UID:GID`)."""
    spec = json.loads((path / "config.json").read_text())
    spec["process"]["args"] = [ENTRYPOINT, *(args or [])]
    spec["process"]["user"].update(uid=uid, gid=gid, additionalGids=[gid])
    (path / "config.json").write_text(json.dumps(spec))


def _storez(container: Container) -> dict[str, Any]:
    probe = container.exec(
        [
            "/opt/stanpkg/bin/python",
            "-c",
            "import urllib.request; print(urllib.request.urlopen("
            "'http://127.0.0.1:8222/streaming/storez', timeout=3).read().decode())",
        ]
    )
    assert probe.returncode == 0, probe.stderr + container.log.read_text()
    answer: dict[str, Any] = json.loads(probe.stdout)
    return answer


def test_the_image_is_group_0_writable_where_it_writes(layout: Path, tmp_path: Path) -> None:
    need_tools("umoci")
    path = tmp_path / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{REF}", str(path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    data = (path / "rootfs" / "data").stat()
    assert (data.st_uid, data.st_gid, data.st_mode & 0o7777) == (UID, 0, 0o770)
    entrypoint = path / "rootfs" / ENTRYPOINT.lstrip("/")
    assert entrypoint.stat().st_mode & 0o777 == 0o755
    if shutil.which("shellcheck"):
        check = subprocess.run(["shellcheck", str(entrypoint)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout


def test_arguments_add_to_the_packaged_configuration(
    layout: Path, bundle: tuple[Path, str, Path]
) -> None:
    """`podman run IMAGE -cid orders`: the packaged file still applies (FILE store in /data,
    monitoring on 8222 for the health check), the flag overrides its cluster ID."""
    path, netns, volume = bundle
    health = _config(layout)["config"]["Healthcheck"]["Test"][1:]

    def run_with(args: list[str], cluster_id: str, store_type: str, channel: str = "") -> None:
        """The image run with ``args``: healthy, serving ``cluster_id`` from a store of
        ``store_type`` (and a client's round trip on ``channel``)."""
        _set_process(path, args)
        name = f"stanpkg-{uuid.uuid4().hex[:8]}"
        container = Container(path, netns, name, cluster_id=cluster_id)
        container.start()
        try:
            container.wait_healthy(health)
            storez = _storez(container)
            assert (storez["cluster_id"], storez["type"]) == (cluster_id, store_type), storez
            if channel:
                assert container.client(channel, "3")["ok"]
        finally:
            container.stop()

    run_with(["-cid", "orders"], "orders", "FILE", "oci.args")
    assert (volume / "datastore" / "oci.args").is_dir()
    # A configuration file named in the arguments replaces the packaged one.
    (volume / "own.conf").write_text(
        'http_port: 8222\nstreaming { cluster_id: "own", store: memory }\n'
    )
    run_with(["-sc", "/data/own.conf"], "own", "MEMORY")


def test_an_arbitrary_user_of_group_0_runs_the_image(
    layout: Path, bundle: tuple[Path, str, Path]
) -> None:
    """OpenShift's way: a random uid, no passwd entry, group 0 (`--user 123456:0`)."""
    path, netns, volume = bundle
    _set_process(path, uid=123456, gid=0)
    container = Container(path, netns, f"stanpkg-{uuid.uuid4().hex[:8]}")
    container.start()
    try:
        container.wait_healthy(_config(layout)["config"]["Healthcheck"]["Test"][1:])
        assert container.client("oci.random_uid", "3")["ok"]
    finally:
        container.stop()
    assert (volume / "datastore").stat().st_uid == 123456
    assert "Traceback" not in container.log.read_text()


def test_a_data_directory_it_cannot_enter_is_a_clear_error(
    bundle: tuple[Path, str, Path],
) -> None:
    """A root-owned 0700 host directory as /data: the reason, not a PermissionError."""
    path, netns, volume = bundle
    os.chown(volume, 0, 0)
    volume.chmod(0o700)
    container = Container(path, netns, f"stanpkg-{uuid.uuid4().hex[:8]}")
    container.start()
    try:
        container.wait_stopped()
    finally:
        container.stop()
    log = container.log.read_text()
    assert "Traceback" not in log, log
    expected = (
        f'"/data/datastore" cannot be reached: "/data" is not enterable by this user (uid {UID})'
    )
    assert expected in log, log


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
        # The entry point puts the image's configuration first (no -sc of its own here).
        assert "-sc" not in args and "-c" not in args
        args = ["-sc", image_conf, *args]
        proc = subprocess.run(
            [sys.executable, "-m", "stanpkg.cli", "validate", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "RAFT_FILE store, clustered" in proc.stdout
