"""The .rpm: spec and package rpmlint-clean (with the justified exceptions of
stanpkg.rpmlintrc), inspected, and installed for real with ``rpm --root`` into a chroot
(a copy of the test Debian image: it has /bin/sh, useradd and python3.11 for the
scriptlets, and %post makes the venv with that python3), where the installed server runs
and serves a STAN client."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.packaging import containers
from tests.packaging.fixtures import ROOT, need_tools, stan_roundtrip

RPMLINTRC = ROOT / "packaging" / "rpm" / "stanpkg.rpmlintrc"


def _rpmlint(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["rpmlint", *map(str, args)], capture_output=True, text=True, timeout=300)


def test_spec_is_rpmlint_clean() -> None:
    need_tools("rpmlint")
    proc = _rpmlint("--ignore-unused-rpmlintrc", ROOT / "packaging" / "rpm" / "stanpkg.spec")
    assert proc.returncode == 0 and "0 errors, 0 warnings" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_rpm_is_rpmlint_clean(rpm_file: Path) -> None:
    need_tools("rpmlint")
    # One rpmlintrc serves the spec and the package checks: filters of the other are unused.
    proc = _rpmlint("--ignore-unused-rpmlintrc", "-r", RPMLINTRC, rpm_file)
    assert proc.returncode == 0 and "0 errors, 0 warnings" in proc.stdout, proc.stdout


def _query(rpm_file: Path, *args: str) -> str:
    return subprocess.run(
        ["rpm", "-qp", *args, str(rpm_file)], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.slow
def test_rpm_contents(rpm_file: Path) -> None:
    files = set(_query(rpm_file, "--list").split())
    for path in (
        "/usr/lib/stanpkg/make-venv",
        "/usr/lib/stanpkg/archive-slice",
        "/usr/lib/stanpkg/wheels/PYTHON_VERSIONS",
        "/usr/lib/systemd/system/stanpkg-export.service",
        "/usr/lib/systemd/system/stanpkg-export.timer",
        "/usr/lib/sysusers.d/stanpkg.conf",
        "/usr/bin/stanpkg",
        "/usr/bin/nats-streaming-server",
        "/etc/stanpkg/stan.conf",
        "/usr/lib/systemd/system/stanpkg.service",
        "/etc/logrotate.d/stanpkg",
        "/var/lib/stanpkg",
    ):
        assert path in files, path
    assert not [f for f in files if f.startswith(("/usr/lib/.build-id", "/opt/"))]
    assert "/etc/stanpkg/stan.conf" in _query(rpm_file, "--configfiles")
    scripts = _query(rpm_file, "--scripts")
    assert "useradd -r -g stanpkg" in scripts  # %pre creates the account
    assert "/run/systemd/system" in scripts  # scriptlets guarded without the systemd macros
    assert "/usr/lib/stanpkg/make-venv" in scripts  # %post makes the venv
    requires = _query(rpm_file, "--requires")
    # Any interpreter the bundled wheels are for, not one exact minor version.
    assert "(python3.13 or python3.12 or python3.11)" in requires, requires
    assert "/opt/stanpkg" not in requires
    assert "https://github.com/stanpkg/stanpkg" in _query(rpm_file, "--queryformat", "%{URL}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_rpm_installs_into_a_chroot(rpm_file: Path, base_rootfs: Path, tmp_path: Path) -> None:
    need_tools("rpm", "chroot")
    root = containers.copy_rootfs(tmp_path / "root")
    rpm = ["rpm", "--root", str(root)]
    subprocess.run([*rpm, "--initdb"], check=True)
    # --nodeps: the chroot's packages are Debian's, unknown to its (empty) rpm database.
    install = subprocess.run(
        [*rpm, "-i", "--nodeps", str(rpm_file)], capture_output=True, text=True, timeout=300
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert "stanpkg:" in (root / "etc/passwd").read_text()  # from %pre
    assert (root / "opt/stanpkg/bin/nats-server").exists()
    verify = subprocess.run([*rpm, "-V", "--nodeps", "stanpkg"], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout  # every file as the package says

    chroot = ["chroot", str(root)]
    check = subprocess.run(
        [*chroot, "/usr/bin/stanpkg", "validate", "/etc/stanpkg/stan.conf"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr

    # The installed venv runs the server (memory store, free ports on the shared network).
    port = _free_port()
    (root / "tmp/mem.conf").write_text('streaming { cluster_id: "test-cluster", store: memory }\n')
    server = subprocess.Popen(
        [*chroot, "/usr/bin/nats-streaming-server", "-sc", "/tmp/mem.conf", "-p", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(1)
        stan_roundtrip(f"nats://127.0.0.1:{port}", "rpm.test", 3)
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=15)
        server.kill()

    # What a server stored: rpm never deletes it (only the package's own files go).
    stored = root / "var/lib/stanpkg/datastore/server.dat"
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"messages")
    remove = subprocess.run([*rpm, "-e", "--nodeps", "stanpkg"], capture_output=True, text=True)
    assert remove.returncode == 0, remove.stdout + remove.stderr
    assert stored.read_bytes() == b"messages"
    assert not (root / "opt/stanpkg").exists()
    assert not (root / "usr/lib/systemd/system/stanpkg.service").exists()
    shutil.rmtree(root, ignore_errors=True)
