"""Three booted Debian containers on one private network: the hosts of the Ansible cluster
tests.

Each container (tests/packaging/containers.py) has its own network namespace with only
``lo`` and a private veth. Here they are joined into one LAN: a bridge in the first
container's namespace, and a veth pair from that bridge into each of the others. The host's
own network is untouched, and nothing is routed off the LAN.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.packaging.containers import Machine, booted

SUBNET = "10.254.10"
BRIDGE = "stanlan"


def lan_address(index: int) -> str:
    return f"{SUBNET}.{index + 1}"


def _ip(machine: Machine, *args: str) -> None:
    subprocess.run(
        ["nsenter", f"--target={machine.leader}", "--net", "ip", *args],
        check=True,
        capture_output=True,
        timeout=30,
    )


def join_lan(machines: Sequence[Machine]) -> None:
    hub = machines[0]
    _ip(hub, "link", "add", BRIDGE, "type", "bridge")
    _ip(hub, "addr", "add", f"{lan_address(0)}/24", "dev", BRIDGE)
    _ip(hub, "link", "set", BRIDGE, "up")
    for index, machine in enumerate(machines[1:], 1):
        port = f"lan{index}"
        _ip(
            hub,
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "lan0",
            "netns",
            str(machine.leader),
        )
        _ip(hub, "link", "set", port, "master", BRIDGE)
        _ip(hub, "link", "set", port, "up")
        _ip(machine, "addr", "add", f"{lan_address(index)}/24", "dev", "lan0")
        _ip(machine, "link", "set", "lan0", "up")


@contextlib.contextmanager
def booted_lan(tmp: Path, names: Sequence[str]) -> Iterator[list[Machine]]:
    """Booted containers named ``names``, on one LAN (addresses: ``lan_address(i)``)."""
    with contextlib.ExitStack() as stack:
        machines = []
        for name in names:
            home = tmp / name
            home.mkdir()
            machines.append(stack.enter_context(booted(home, name)))
        join_lan(machines)
        yield machines
