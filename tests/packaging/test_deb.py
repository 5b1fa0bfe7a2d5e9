"""The .deb: built, lintian-clean, and installed for real with apt-get into booted
containers. On Debian 12 the service starts, serves a STAN client, survives a log
rotation, refuses a broken config at ExecStartPre, and is purged: keeping the message
store unless the operator confirms (debconf), else without a trace. On Debian 13 (another
python3) the same package makes its venv with that interpreter and serves a client."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging import containers
from tests.packaging.containers import Machine
from tests.packaging.fixtures import VERSION, need_tools, roundtrip_in_netns

pytestmark = pytest.mark.slow

CONTAINER_DEB_DIR = "/var/cache/stanpkg-test"


def test_lintian_is_clean(deb_file: Path) -> None:
    need_tools("lintian")
    proc = subprocess.run(
        ["lintian", "--fail-on", "error,warning,info", "--info", deb_file],
        capture_output=True,
        text=True,
        timeout=600,
    )
    tags = [line for line in proc.stdout.splitlines() if line[:2] in ("E:", "W:", "I:")]
    assert proc.returncode == 0 and not tags, proc.stdout + proc.stderr


def test_package_layout(deb_file: Path) -> None:
    listing = subprocess.run(
        ["dpkg-deb", "--contents", deb_file], capture_output=True, text=True, check=True
    ).stdout
    paths = {line.split()[5].lstrip(".") for line in listing.splitlines()}
    for expected in (
        "/usr/lib/stanpkg/make-venv",
        "/usr/lib/stanpkg/archive-slice",
        "/usr/lib/stanpkg/wheels/PYTHON_VERSIONS",
        "/usr/bin/stanpkg",
        "/usr/bin/nats-streaming-server",
        "/etc/stanpkg/stan.conf",
        "/lib/systemd/system/stanpkg.service",
        "/lib/systemd/system/stanpkg-export.service",
        "/lib/systemd/system/stanpkg-export.timer",
        "/usr/share/doc/stanpkg/pipeline.md.gz",
        "/etc/logrotate.d/stanpkg",
        "/var/lib/stanpkg/",
        "/usr/share/man/man1/stanpkg.1.gz",
    ):
        assert expected in paths, expected
    # No venv and no byte-code shipped: postinst makes the venv with the host's Python.
    assert not [p for p in paths if "__pycache__" in p or p.startswith("/opt/")]
    wheels = {Path(p).name for p in paths if p.startswith("/usr/lib/stanpkg/wheels/")}
    # Wheels for every CPython the Depends line admits (uvloop has no abi3 wheel).
    for tag in ("cp311", "cp312", "cp313"):
        assert [w for w in wheels if w.startswith("uvloop-") and f"-{tag}-" in w], tag
    assert [w for w in wheels if w.startswith("pip-")]  # the installer, never in the venv
    # stanpkg pure, and compiled (manylinux) for the CPythons the build machine has: its
    # 3.11 at least (docs/install.md).
    assert f"stanpkg-{VERSION}-py3-none-any.whl" in wheels
    manylinux = "manylinux2014_x86_64.manylinux_2_17_x86_64"
    assert f"stanpkg-{VERSION}-cp311-cp311-{manylinux}.whl" in wheels
    # The SQL drivers are bundled (extras on pip, part of the package here).
    assert [w for w in wheels if w.startswith("psycopg_binary-")]
    assert [w for w in wheels if w.startswith("pymysql-")]
    # So is ISA-L's CRC-32 for the FILE store (the crc extra), for every CPython.
    for tag in ("cp311", "cp312", "cp313"):
        assert [w for w in wheels if w.startswith("isal-") and f"-{tag}-" in w], tag

    def field(name: str) -> str:
        return subprocess.run(
            ["dpkg-deb", "--field", deb_file, name], capture_output=True, text=True, check=True
        ).stdout.strip()

    depends = field("Depends")
    # Any of the interpreters the wheels are for: Debian 12 and Ubuntu 22.04 have 3.11,
    # Ubuntu 24.04 3.12, Debian 13 3.13 (an exact "python3.11" fits only the first two).
    assert depends.startswith("python3.13 | python3.12 | python3.11,"), depends
    assert "adduser" in depends and "libc6 (>= 2.34)" in depends
    assert "debconf" in depends  # the purge question
    assert field("Suggests") == "java17-runtime-headless"  # stanpkg export's Spark
    assert field("Homepage") == "https://github.com/stanpkg/stanpkg"
    templates = subprocess.run(
        ["dpkg-deb", "--info", deb_file, "templates"], capture_output=True, text=True, check=True
    ).stdout
    assert "Template: stanpkg/purge_data" in templates
    conffiles = subprocess.run(
        ["dpkg-deb", "--ctrl-tarfile", deb_file], capture_output=True, check=True
    ).stdout
    assert b"/etc/stanpkg/stan.conf" in conffiles


def _install(machine: Machine, deb_file: Path) -> None:
    target = machine.root / CONTAINER_DEB_DIR.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(deb_file, target)
    out = machine.sh(f"cd {CONTAINER_DEB_DIR} && apt-get install -y -q ./{deb_file.name} 2>&1")
    # postinst (make-venv) says which build it installed, compiled or pure.
    assert "/opt/stanpkg ready (stanpkg " in out and ", hot path: " in out, out


def _venv_python(machine: Machine) -> str:
    """The X.Y of the interpreter the installed venv was made with."""
    cfg = machine.sh("cat /opt/stanpkg/pyvenv.cfg")
    found = re.search(r"(?m)^version = (\d+\.\d+)", cfg)
    assert found, cfg
    return found.group(1)


def _hot_path(machine: Machine) -> str:
    """What the installed stanpkg runs, as its --version says (compiled or pure)."""
    return machine.sh("stanpkg --version").strip().splitlines()[-1]


def test_apt_install_service_purge(machine: Machine, deb_file: Path) -> None:
    _install(machine, deb_file)

    # Installed as a service: enabled, started, running as its own user, sandboxed.
    machine.wait_active("stanpkg.service")
    assert _venv_python(machine) == containers.DEB_SUITES["bookworm"]
    assert _hot_path(machine) == "hot path: compiled (mypyc)"  # the cp311 manylinux wheel
    # The export units are there for docs/pipeline.md, off until Spark is added.
    assert machine.sh("systemctl is-enabled stanpkg-export.timer", check=False).strip() == (
        "disabled"
    )
    assert "stanpkg export --config" in machine.sh("systemctl cat stanpkg-export.service")
    assert machine.sh("systemctl is-enabled stanpkg").strip() == "enabled"
    assert machine.sh("id -u stanpkg").strip().isdigit()
    user = machine.sh("ps -o user= -C stanpkg | sort -u").split()
    assert user == ["stanpkg"], user
    assert machine.sh("stat -c %U:%G:%a /etc/stanpkg/stan.conf").strip() == "root:stanpkg:640"
    assert machine.sh("stat -c %U /var/lib/stanpkg").strip() == "stanpkg"
    journal = machine.sh("journalctl -u stanpkg --no-pager")
    assert "/etc/stanpkg/stan.conf: valid:" in journal  # ExecStartPre ran stanpkg validate

    # A real STAN client through the installed server.
    result = roundtrip_in_netns(machine, "pkg.test", 5)
    assert result["ok"], result

    # logrotate: the server reopens its log (SIGUSR1 through ExecReload) and keeps logging.
    machine.sh("logrotate -f /etc/logrotate.d/stanpkg")
    assert machine.sh("ls /var/log/stanpkg").split().count("stanpkg.log.1") == 1
    machine.wait_active("stanpkg.service")
    roundtrip_in_netns(machine, "pkg.test2", 1)
    assert "STREAM" in machine.sh("cat /var/log/stanpkg/stanpkg.log")

    # A broken config never starts: ExecStartPre stops it with a compiler-style message.
    machine.sh("cp /etc/stanpkg/stan.conf /root/stan.conf.good")
    machine.sh("sed -i 's/max_msgs: 1000000/max_msgs: -5/' /etc/stanpkg/stan.conf")
    restart = machine.run(["systemctl", "restart", "stanpkg"], check=False)
    assert restart.returncode != 0
    journal = machine.sh("journalctl -u stanpkg --no-pager -n 30")
    assert "/etc/stanpkg/stan.conf:" in journal and "error:" in journal, journal
    machine.sh("cp /root/stan.conf.good /etc/stanpkg/stan.conf && systemctl restart stanpkg")
    machine.wait_active("stanpkg.service")
    # FILE store: what was published before the restarts is still there.
    replay = roundtrip_in_netns(machine, "pkg.test", 1, stored=5)
    assert replay["replayed"] == [f"msg-{i}" for i in range(5)], replay

    # Graceful stop on SIGTERM (the server's own clean exit, not death by the signal).
    machine.sh("systemctl stop stanpkg")
    result_code = machine.sh("systemctl show -p ExecMainStatus --value stanpkg").strip()
    assert result_code == "0", machine.sh("journalctl -u stanpkg --no-pager -n 30")

    # Purge keeps the message store (and logs) unless the operator says otherwise: the
    # debconf question defaults to "no", which is what a non-interactive purge takes.
    machine.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q stanpkg")
    _assert_purged(machine)
    assert machine.sh("ls /var/lib/stanpkg/datastore").split(), "message store deleted"
    assert machine.sh("ls /var/log/stanpkg").split()

    # A reinstall serves the kept messages.
    _install(machine, deb_file)
    machine.wait_active("stanpkg.service")
    replay = roundtrip_in_netns(machine, "pkg.test", 0, stored=6)  # 5, then 1 more above
    assert replay["replayed"] == [f"msg-{i}" for i in range(6)], replay

    # Preseeded "yes": purge removes the data and logs too, without a trace.
    machine.sh('echo "stanpkg stanpkg/purge_data boolean true" | debconf-set-selections')
    machine.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y -q stanpkg")
    _assert_purged(machine)
    for path in ("/var/lib/stanpkg", "/var/log/stanpkg"):
        assert not (machine.root / path.lstrip("/")).exists(), path
    # debconf forgets the package's answers with it (the next install asks again).
    answers = machine.sh("debconf-show stanpkg 2>/dev/null || true")
    assert "purge_data" not in answers, answers


def _assert_purged(machine: Machine) -> None:
    """No package files, unit or process left (the data is checked by the caller)."""
    for path in (
        "/opt/stanpkg",
        "/etc/stanpkg",
        "/lib/systemd/system/stanpkg.service",
        "/usr/bin/stanpkg",
        "/etc/logrotate.d/stanpkg",
    ):
        assert not (machine.root / path.lstrip("/")).exists(), path
    assert machine.run(["pgrep", "-f", "stanpkg"], check=False).returncode == 1
    status = machine.sh("dpkg-query -W -f='${db:Status-Status}' stanpkg 2>/dev/null || true")
    assert status in ("", "not-installed"), status


@pytest.fixture
def trixie(tmp_path: Path) -> Iterator[Machine]:
    """A booted Debian 13 container (python3.13), its image cached as bookworm's is."""
    try:
        with containers.booted(tmp_path, "stanpkg-trixie", "trixie") as m:
            yield m
    except containers.Unavailable as exc:
        pytest.skip(f"no Debian 13 container on this machine: {exc}")


def test_installs_on_debian_13(trixie: Machine, deb_file: Path) -> None:
    """The same .deb on another release and Python: postinst makes the venv with Debian
    13's python3.13 from the bundled cp313 wheels; the service serves a client; the
    export's pieces are in place and say what Spark needs; remove takes the venv along."""
    _install(trixie, deb_file)
    trixie.wait_active("stanpkg.service")
    assert _venv_python(trixie) == containers.DEB_SUITES["trixie"]
    assert _hot_path(trixie) == "hot path: compiled (mypyc)"  # the cp313 manylinux wheel
    result = roundtrip_in_netns(trixie, "pkg.trixie", 3)
    assert result["ok"], result

    # The slice_archive_script of docs/pipeline.md runs the installed command (no Spark).
    usage = trixie.run(["/usr/lib/stanpkg/archive-slice"], check=False)
    assert usage.returncode == 2, usage.stdout + usage.stderr
    assert "usage: archive-slice CHANNEL DATFILE IDXFILE" in usage.stderr, usage.stderr
    # Export without the spark extra: a hint naming what to install, not a traceback.
    export = trixie.run(
        ["stanpkg", "export", "--config", "/etc/stanpkg/stan.conf", "--out", "/root/out"],
        check=False,
    )
    assert export.returncode == 1, export.stdout + export.stderr
    assert "make-venv --extra spark" in export.stderr, export.stderr
    assert "Traceback" not in export.stderr

    trixie.sh("apt-get remove -y -q stanpkg")
    assert not (trixie.root / "opt/stanpkg").exists()  # the venv postinst made
    assert not (trixie.root / "usr/lib/stanpkg").exists()
    assert trixie.sh("ls /var/lib/stanpkg/datastore").split()  # data kept on remove
