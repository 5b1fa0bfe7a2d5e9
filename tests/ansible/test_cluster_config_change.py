"""A configuration change applied with site.yml to a running 3-node cluster (booted Debian
containers on one LAN, the built .deb): the role restarts the nodes one at a time, the
serving node last, through playbooks/rolling_restart.yml, so that no two nodes are ever
down together; stanpkg_restart_on_change: false restarts nothing; no run warns; and when a
node the rolling restart stopped does not come back, the play says which node is down and
what to run."""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest

from tests.ansible.ansible_run import playbook
from tests.ansible.test_cluster_converge import (
    CLUSTER_ID,
    HOSTS,
    SITE,
    _changed_hosts,
    _wait_formed,
    converge_cluster,
    machines,
)
from tests.packaging.containers import Machine
from tests.packaging.fixtures import roundtrip_in_netns

pytestmark = pytest.mark.slow
__all__ = ["machines"]  # the fixture, shared with test_cluster_converge


def _no_warnings(run: subprocess.CompletedProcess[str]) -> None:
    assert "[WARNING]" not in run.stdout + run.stderr, (run.stdout + run.stderr)[-6000:]


def _section(output: str, header: str) -> str:
    """What the output says under ``header`` (a task or handler), up to the next one."""
    assert header in output, output[-6000:]
    return re.split(r"\n(?:TASK|RUNNING HANDLER|PLAY) \[", output.split(header, 1)[1])[0]


def _pids(machines: dict[str, Machine]) -> dict[str, str]:
    return {
        n: m.sh("systemctl show -p MainPID --value stanpkg").strip() for n, m in machines.items()
    }


def _down_interval(machine: Machine) -> tuple[int, int]:
    """When the service last stopped being active and last became active again (the
    host's monotonic clock, which every container shares)."""
    out = machine.sh(
        "systemctl show --value -p ActiveExitTimestampMonotonic -p ActiveEnterTimestampMonotonic"
        " stanpkg"
    ).split()
    enter, exit_ = int(out[0]), int(out[1])
    return exit_, enter


def test_a_config_change_rolls_through_the_cluster_one_node_at_a_time(
    machines: dict[str, Machine], deb_file: Path, tmp_path: Path
) -> None:
    inventory, extra, converge = converge_cluster(machines, deb_file, tmp_path)
    _no_warnings(converge)
    leader = _wait_formed(machines)
    assert roundtrip_in_netns(machines["stan-a"], "orders.before", 5, cluster_id=CLUSTER_ID)["ok"]
    pids = _pids(machines)

    # A changed limit: applied one node at a time, the serving node last.
    changed = playbook(
        SITE, inventory=inventory, extra={**extra, "stanpkg_limits_max_msgs": 50000}, tmp=tmp_path
    )
    (tmp_path / "change.log").write_text(changed.stdout)
    assert changed.returncode == 0, changed.stdout[-8000:] + changed.stderr[-2000:]
    _no_warnings(changed)
    restarted = _changed_hosts(changed.stdout, "Restart stanpkg")  # the rolling restart's
    assert sorted(restarted) == sorted(HOSTS) and restarted[-1] == leader, restarted
    handler = _section(changed.stdout, "RUNNING HANDLER [stanpkg : Restart stanpkg]")
    assert "changed: [" not in handler, "the role's handler restarted a cluster node itself"
    intervals = sorted(_down_interval(m) for m in machines.values())
    for (_, back), (down, _) in itertools.pairwise(intervals):
        assert back < down, f"two nodes were down at once: {intervals}"
    after = _pids(machines)
    assert all(after[n] != pids[n] for n in HOSTS), (pids, after)
    for machine in machines.values():
        assert "max_msgs: 50000" in machine.sh("cat /etc/stanpkg/stan.conf")
    new_leader = _wait_formed(machines)
    result = roundtrip_in_netns(
        machines[new_leader], "orders.before", 1, stored=5, cluster_id=CLUSTER_ID
    )
    assert result["ok"], result

    # Nothing changed: nothing restarts.
    same = playbook(
        SITE, inventory=inventory, extra={**extra, "stanpkg_limits_max_msgs": 50000}, tmp=tmp_path
    )
    assert same.returncode == 0, same.stdout[-6000:]
    _no_warnings(same)
    assert _pids(machines) == after

    # The opt-out: the file changes, the servers keep running.
    opt_out = {**extra, "stanpkg_limits_max_msgs": 60000, "stanpkg_restart_on_change": False}
    kept = playbook(SITE, inventory=inventory, extra=opt_out, tmp=tmp_path)
    assert kept.returncode == 0, kept.stdout[-6000:]
    _no_warnings(kept)
    assert _pids(machines) == after
    assert "max_msgs: 60000" in machines["stan-a"].sh("cat /etc/stanpkg/stan.conf")

    # The serving node will not start again: the play stops there and says it is down.
    leader = _wait_formed(machines)
    broken = machines[leader]
    broken.sh(
        "mkdir -p /etc/systemd/system/stanpkg.service.d && printf '[Service]\\n"
        "ExecStartPre=/bin/false\\n' >/etc/systemd/system/stanpkg.service.d/broken.conf"
        " && systemctl daemon-reload"
    )
    failed = playbook(
        SITE, inventory=inventory, extra={**extra, "stanpkg_limits_max_msgs": 70000}, tmp=tmp_path
    )
    (tmp_path / "failed.log").write_text(failed.stdout)
    assert failed.returncode != 0
    out = " ".join(failed.stdout.split())
    assert f"The rolling restart stopped at {leader} and {leader} IS DOWN" in out, out[-6000:]
    assert f"ansible {leader} -i {tmp_path / 'hosts.yml'} -b -m" in out, out[-6000:]
    assert "name=stanpkg state=started" in out, out[-6000:]
    assert broken.sh("systemctl is-active stanpkg", check=False).strip() != "active"
    for name, machine in machines.items():
        if name != leader:
            assert machine.sh("systemctl is-active stanpkg", check=False).strip() == "active"
