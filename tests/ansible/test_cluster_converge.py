"""The role deploys a 3-node stanpkg cluster on three booted Debian 12 containers joined by
one private LAN (cluster_machines.py), from the built .deb and an inventory of three hosts:
the cluster forms (one Leader, two Followers), and the cluster rolling restart goes one node
at a time, moves the serving role off the serving node before restarting it, and leaves the
cluster healthy with every message published before it still there."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.ansible_run import playbook
from tests.ansible.cluster_machines import booted_lan, lan_address
from tests.packaging.containers import Machine, Unavailable
from tests.packaging.fixtures import ROOT, roundtrip_in_netns

pytestmark = pytest.mark.slow

SITE = ROOT / "ansible" / "playbooks" / "site.yml"
ROLLING = ROOT / "ansible" / "playbooks" / "rolling_restart.yml"
HOSTS = ("stan-a", "stan-b", "stan-c")
CLUSTER_ID = "orders-cluster"


@pytest.fixture
def machines(base_rootfs: Path, tmp_path: Path) -> Iterator[dict[str, Machine]]:
    suffix = re.sub(r"[^a-z0-9]+", "-", tmp_path.name.lower())[-20:]
    try:
        with booted_lan(tmp_path, [f"stanpkg-{suffix}-{h[-1]}" for h in HOSTS]) as booted:
            yield dict(zip(HOSTS, booted, strict=True))
    except Unavailable as exc:
        pytest.skip(f"cannot boot systemd containers here: {exc}")


def _inventory(tmp: Path, machines: dict[str, Machine]) -> Path:
    hosts = {
        name: {
            "ansible_connection": "nsenter",
            "ansible_nsenter_pid": machine.leader,
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_become": False,  # nsenter is already root; the image has no sudo
            "stanpkg_cluster_address": lan_address(index),
        }
        for index, (name, machine) in enumerate(machines.items())
    }
    group = {"hosts": hosts, "vars": {"stanpkg_cluster_group": "stanpkg"}}
    inventory = tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"stanpkg": group}}}))
    return inventory


def _serverz(machine: Machine) -> dict[str, Any]:
    probe = machine.host_in_netns(
        [
            sys.executable,
            "-c",
            "import urllib.request; "
            "print(urllib.request.urlopen('http://127.0.0.1:8222/streaming/serverz').read().decode())",
        ],
        timeout=30,
    )
    if probe.returncode != 0:
        return {}
    answer: dict[str, Any] = json.loads(probe.stdout)
    return answer


def _roles(machines: dict[str, Machine]) -> dict[str, str]:
    roles = {}
    for name, machine in machines.items():
        serverz = _serverz(machine)
        roles[name] = f"{serverz.get('state', 'down')}/{serverz.get('role', '-')}"
    return roles


def _wait_formed(machines: dict[str, Machine], timeout: float = 120) -> str:
    """The serving node once every node says CLUSTERED and exactly one says Leader."""
    deadline = time.monotonic() + timeout
    roles: dict[str, str] = {}
    while time.monotonic() < deadline:
        roles = _roles(machines)
        leaders = [name for name, role in roles.items() if role == "CLUSTERED/Leader"]
        followers = [name for name, role in roles.items() if role == "CLUSTERED/Follower"]
        if len(leaders) == 1 and len(followers) == len(machines) - 1:
            return leaders[0]
        time.sleep(1)
    journal = {
        name: m.sh("journalctl --no-pager -u stanpkg -n 40", check=False)
        for name, m in machines.items()
    }
    raise AssertionError(f"the cluster did not form: {roles}\n{journal}")


def _changed_hosts(output: str, task: str) -> list[str]:
    """The hosts a task reported changed on, in the order the play ran them."""
    hosts = []
    for chunk in output.split(f"TASK [{task}]")[1:]:
        body = chunk.split("TASK [", 1)[0]
        hosts += re.findall(r"changed: \[([^\]]+)\]", body)
    return hosts


def converge_cluster(
    machines: dict[str, Machine], deb_file: Path, tmp_path: Path
) -> tuple[Path, dict[str, str], subprocess.CompletedProcess[str]]:
    """site.yml applied to the three machines (the packaged cluster): the inventory, the
    extra variables and the run, which succeeded."""
    inventory = _inventory(tmp_path, machines)
    extra = {"stanpkg_package_file": str(deb_file), "stanpkg_cluster_id": CLUSTER_ID}
    converge = playbook(SITE, inventory=inventory, extra=extra, tmp=tmp_path)
    assert converge.returncode == 0, converge.stdout[-6000:] + converge.stderr[-2000:]
    return inventory, extra, converge


def test_cluster_converges_and_rolls_one_node_at_a_time(
    machines: dict[str, Machine], deb_file: Path, tmp_path: Path
) -> None:
    inventory, _, _ = converge_cluster(machines, deb_file, tmp_path)
    for index, (name, machine) in enumerate(machines.items()):
        conf = machine.sh("cat /etc/stanpkg/stan.conf")
        others = [h for h in HOSTS if h != name]
        assert f'node_id: "{name}"' in conf
        assert "peers: [" + ", ".join(f'"{h}"' for h in others) + "]" in conf
        routes = [f'"nats://{lan_address(HOSTS.index(h))}:6222"' for h in others]
        assert "routes: [" + ", ".join(routes) + "]" in conf, conf
        assert index == HOSTS.index(name)

    # The cluster forms: one Leader, two Followers. Messages published before the rollout.
    first_leader = _wait_formed(machines)
    before = roundtrip_in_netns(machines["stan-a"], "orders.before", 5, cluster_id=CLUSTER_ID)
    assert before["ok"], before
    pids = {
        n: m.sh("systemctl show -p MainPID --value stanpkg").strip() for n, m in machines.items()
    }

    started = time.monotonic()
    rolling = playbook(ROLLING, inventory=inventory, tmp=tmp_path)
    print(f"rolling restart of {len(HOSTS)} nodes: {time.monotonic() - started:.0f} s")
    (tmp_path / "rolling.log").write_text(rolling.stdout)
    assert rolling.returncode == 0, rolling.stdout[-8000:] + rolling.stderr[-2000:]
    out = rolling.stdout
    # One node at a time, followers first, the serving node last; only the serving node
    # was stopped first (the serving role moved off it before its restart).
    restarted = _changed_hosts(out, "Restart stanpkg")
    assert sorted(restarted) == sorted(HOSTS) and restarted[-1] == first_leader, restarted
    assert _changed_hosts(
        out, "Stop the serving node gracefully (it releases the lease, a follower takes it)"
    ) == [first_leader]
    assert out.count("Healthy: ") >= 2 * len(HOSTS) + 1, out[-6000:]

    new_leader = _wait_formed(machines)
    assert new_leader != first_leader
    for name, machine in machines.items():
        assert machine.sh("systemctl show -p MainPID --value stanpkg").strip() != pids[name]
    # Everything published before the rollout is still there (replayed from the start).
    after = roundtrip_in_netns(
        machines["stan-b"], "orders.before", 2, stored=5, cluster_id=CLUSTER_ID
    )
    assert after["ok"] and after["replayed"] == [f"msg-{i}" for i in range(5)], after

    # A node that is down stops the next rolling restart before anything is restarted.
    down = next(h for h in HOSTS if h != new_leader)
    machines[down].sh("systemctl stop stanpkg")
    pids = {
        n: m.sh("systemctl show -p MainPID --value stanpkg").strip() for n, m in machines.items()
    }
    quick = ["-e", "stanpkg_monitor_wait_retries=3", "-e", "stanpkg_monitor_wait_delay=1"]
    refused = playbook(ROLLING, inventory=inventory, tmp=tmp_path, args=quick)
    assert refused.returncode != 0
    assert "The cluster is not healthy after 3 looks at /streaming/serverz" in refused.stdout
    assert f"{down}: no answer" in refused.stdout, refused.stdout[-6000:]
    assert _changed_hosts(refused.stdout, "Restart stanpkg") == []
    for name, machine in machines.items():
        assert machine.sh("systemctl show -p MainPID --value stanpkg").strip() == pids[name]
