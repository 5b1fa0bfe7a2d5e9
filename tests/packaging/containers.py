"""Real Debian machines (12 "bookworm" by default, 13 "trixie" for the deb's second release)
for the packaging and Ansible tests: a debootstrap'd root file system (built once per
release, cached) booted with ``systemd-nspawn -b``, so systemd, apt, dpkg
maintainer scripts and the unit's sandboxing run for real.

The container gets a private network namespace (only ``lo``): nothing it runs can clash
with ports on the host, and it reaches no network. Commands run inside it through
``nsenter`` into its init's namespaces (no machined needed on the host); a client on the
host joins only its network namespace to talk to the server inside.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

SUITE = "bookworm"
# The releases the deb is installed on, with the python3 each has (the venv is made with it).
DEB_SUITES = {"bookworm": "3.11", "trixie": "3.13"}
# What the tests install into the image: systemd to boot; python3 + python3-apt for Ansible
# modules; adduser/logrotate/python3 for the deb's dependencies (the container has no
# network, so apt-get install ./stanpkg_*.deb must find them installed).
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-apt",
    "adduser",
    "logrotate",
    "procps",
    "ca-certificates",
)
CACHE_ENV = "STANPKG_ROOTFS_CACHE"
DEFAULT_CACHE = Path("/var/tmp/stanpkg-test-rootfs")
IN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Unavailable(Exception):
    """This machine cannot run the containers (the reason is the message)."""


def check_host() -> None:
    if os.geteuid() != 0:
        raise Unavailable("needs root (debootstrap, systemd-nspawn)")
    for tool in ("debootstrap", "systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} is not installed (packaging/install-tools.sh test)")


def debian_mirror() -> str:
    """The Debian mirror apt on this host is configured with (the one reachable here)."""
    script = Path(__file__).resolve().parents[2] / "packaging" / "debian-mirror.sh"
    return subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, check=True
    ).stdout.strip()


def base_rootfs(suite: str = SUITE) -> Path:
    """The cached base image of ``suite``, debootstrapping it first if needed (about two
    minutes)."""
    check_host()
    key = hashlib.sha256(f"{suite} {' '.join(PACKAGES)}".encode()).hexdigest()[:12]
    cache = Path(os.environ.get(CACHE_ENV, DEFAULT_CACHE))
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / f"{suite}-{key}"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one debootstrap at a time
        if (root / ".complete").exists():
            return root
        partial = cache / f".partial-{key}"
        shutil.rmtree(partial, ignore_errors=True)
        proc = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                suite,
                str(partial),
                debian_mirror(),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            raise Unavailable(f"debootstrap failed: {(proc.stdout + proc.stderr)[-2000:]}")
        # No getty on the (absent) console, quiet apt, no network wait.
        (partial / "etc/hostname").write_text("stanpkg-test\n")
        with contextlib.suppress(FileNotFoundError):
            (partial / "etc/systemd/system/getty.target.wants/getty@tty1.service").unlink()
        (partial / ".complete").write_text(key)
        partial.rename(root)
    return root


def copy_rootfs(dest: Path, suite: str = SUITE) -> Path:
    """A private, writable copy of the base image for one machine."""
    base = base_rootfs(suite)
    subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(dest)], check=True, timeout=300)
    return dest


class Machine:
    """A booted container. ``run`` executes inside it; ``host_in_netns`` runs a host program
    inside its network namespace."""

    def __init__(self, root: Path, name: str, log: Path) -> None:
        self.root = root
        self.name = name
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.leader = 0

    def boot(self, timeout: float = 90) -> None:
        logf = open(self.log, "wb")  # noqa: SIM115 - closed when the process ends
        self.proc = subprocess.Popen(
            [
                "systemd-nspawn",
                "--quiet",
                "--register=no",  # no machined on the host
                "--keep-unit",  # no scope unit from a host systemd (there may be none)
                "--private-network",
                "--console=passive",
                f"--machine={self.name}",
                "-D",
                str(self.root),
                "--boot",
            ],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.leader:
            if self.proc.poll() is not None:
                raise Unavailable(f"systemd-nspawn exited: {self.log.read_text()[-2000:]}")
            self.leader = self._find_leader()
            time.sleep(0.2)
        if not self.leader:
            raise Unavailable("no init process in the container")
        self._add_interface()
        while time.monotonic() < deadline:
            state = self.run(["systemctl", "is-system-running"], check=False).stdout.strip()
            if state in ("running", "degraded"):
                return
            time.sleep(0.5)
        raise Unavailable(f"container did not finish booting: {self.log.read_text()[-2000:]}")

    def _add_interface(self) -> None:
        """An interface with an address of its own in the container's private network
        namespace, as any real host has: nats-server listening on 0.0.0.0 enumerates the
        host's addresses for its client URLs, and finds none with only ``lo``. A veth pair
        with both ends inside (no dummy driver everywhere); nothing is routed anywhere."""
        ip = [*self._nsenter("--net"), "ip"]
        for args in (
            ["link", "add", "stan0", "type", "veth", "peer", "name", "stan1"],
            ["addr", "add", "10.254.254.1/32", "dev", "stan0"],
            ["link", "set", "stan1", "up"],
            ["link", "set", "stan0", "up"],
        ):
            subprocess.run([*ip, *args], check=True, capture_output=True, timeout=30)

    def _find_leader(self) -> int:
        assert self.proc is not None
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                for child in (task / "children").read_text().split():
                    if Path(f"/proc/{child}/comm").read_text().strip() == "systemd":
                        return int(child)
        return 0

    def _nsenter(self, *namespaces: str) -> list[str]:
        return ["nsenter", f"--target={self.leader}", *namespaces]

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: str | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            *self._nsenter("--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd"),
            "/usr/bin/env",
            "-i",
            f"PATH={IN_PATH}",
            "LANG=C.UTF-8",
            "HOME=/root",
            "DEBIAN_FRONTEND=noninteractive",
            *argv,
        ]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def sh(self, script: str, *, check: bool = True, timeout: float = 300) -> str:
        return self.run(["/bin/sh", "-c", script], check=check, timeout=timeout).stdout

    def host_in_netns(
        self, argv: Sequence[str], *, timeout: float = 120, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._nsenter("--net"), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )

    def wait_active(self, unit: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.run(["systemctl", "is-active", unit], check=False).stdout.strip()
            if state == "active":
                return
            time.sleep(0.5)
        journal = self.run(["journalctl", "--no-pager", "-u", unit, "-n", "80"], check=False)
        raise AssertionError(f"{unit} is {state!r}:\n{journal.stdout}")

    def shutdown(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        # SIGTERM to nspawn asks the container's systemd to power off cleanly.
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@contextlib.contextmanager
def booted(tmp: Path, name: str, suite: str = SUITE) -> Iterator[Machine]:
    """A fresh copy of the base image, booted; powered off and deleted afterwards."""
    root = copy_rootfs(tmp / "rootfs", suite)
    machine = Machine(root, name, tmp / "console.log")
    try:
        machine.boot()
        yield machine
    finally:
        machine.shutdown()
        shutil.rmtree(root, ignore_errors=True)
