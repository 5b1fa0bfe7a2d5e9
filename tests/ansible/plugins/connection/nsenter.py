"""Ansible connection into a booted systemd-nspawn container through ``nsenter`` (tests only).

The test containers have no network and no sshd; the controller runs as root on the same
host, so it enters the container init's namespaces directly, like ``machinectl shell``
without machined.
"""

from __future__ import annotations

import shlex
import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
name: nsenter
short_description: run commands in a container through nsenter (test harness)
description:
  - Enters the mount, UTS, IPC, network and PID namespaces of a container's init process.
options:
  nsenter_pid:
    description: PID (on the host) of the container's init process.
    type: int
    vars:
      - name: ansible_nsenter_pid
"""

IN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Connection(ConnectionBase):  # type: ignore[misc]
    transport = "nsenter"
    has_pipelining = True

    def _prefix(self) -> list[str]:
        pid = self.get_option("nsenter_pid")
        if not pid:
            raise AnsibleConnectionFailure("ansible_nsenter_pid is not set")
        return [
            "nsenter",
            f"--target={pid}",
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--root",
            "--wd",
            "/usr/bin/env",
            "-i",
            f"PATH={IN_PATH}",
            "LANG=C.UTF-8",
            "HOME=/root",
        ]

    def _connect(self) -> Connection:
        self._connected = True
        return self

    def exec_command(
        self, cmd: str, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        proc = subprocess.run(
            [*self._prefix(), "/bin/sh", "-c", cmd],
            input=in_data,
            capture_output=True,
            check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr

    def put_file(self, in_path: str, out_path: str) -> None:
        super().put_file(in_path, out_path)
        with open(in_path, "rb") as src:
            proc = subprocess.run(
                [*self._prefix(), "/bin/sh", "-c", f"cat > {shlex.quote(out_path)}"],
                stdin=src,
                capture_output=True,
                check=False,
            )
        if proc.returncode != 0:
            raise AnsibleError(f"put_file {out_path}: {proc.stderr.decode(errors='replace')}")

    def fetch_file(self, in_path: str, out_path: str) -> None:
        super().fetch_file(in_path, out_path)
        with open(out_path, "wb") as dest:
            proc = subprocess.run(
                [*self._prefix(), "/bin/cat", in_path], stdout=dest, stderr=subprocess.PIPE
            )
        if proc.returncode != 0:
            raise AnsibleError(f"fetch_file {in_path}: {proc.stderr.decode(errors='replace')}")

    def close(self) -> None:
        self._connected = False

    def reset(self) -> None:
        self.close()
