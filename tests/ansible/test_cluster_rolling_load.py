"""The Ansible rolling restart of the packaged 3-node cluster under load, with data stored:
the three Debian 12 containers of test_cluster_converge.py, the cluster converged from the
.deb with site.yml, FILL messages of 128 bytes stored in four channels, then a client in one
node's network namespace publishing as fast as it can (64 PubAcks in flight, reconnecting
and resending what is unacknowledged on a failure) while rolling_restart.yml restarts the
nodes one by one. Afterwards every acknowledged message is in its channel, the fill
channels end where they ended, the longest time without a PubAck was at most LONGEST_GAP,
and each node's service was restarted once by the play: no crash loop, no fatal line.

STANPKG_ROLLING_FILL sets FILL (default 200,000)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.ansible_run import playbook
from tests.ansible.test_cluster_converge import (
    CLUSTER_ID,
    HOSTS,
    ROLLING,
    SITE,
    _inventory,
    _wait_formed,
    machines,
)
from tests.packaging.containers import Machine
from tests.packaging.fixtures import ROOT

pytestmark = pytest.mark.slow

__all__ = ["machines"]  # the converge test's fixture: three booted containers on one LAN

FILL = int(os.environ.get("STANPKG_ROLLING_FILL", "200000"))
FILL_CHANNELS = 4
LONGEST_GAP = 5.0  # seconds without a PubAck, at most
URL = "nats://127.0.0.1:4222"  # each node's own embedded nats-server, in its namespace
LOG_FILE = "/var/log/stanpkg/stanpkg.log"  # the role's stanpkg_nats_log_file
UNIT = "stanpkg"


def _stan_load(machine: Machine, *args: str, timeout: float) -> dict[str, Any]:
    """Runs tests/packaging/stan_load.py in the machine's network namespace; its JSON."""
    argv = [sys.executable, "-m", "tests.packaging.stan_load", *args]
    proc = machine.host_in_netns(argv, cwd=ROOT, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _start_load(machine: Machine, tmp: Path) -> subprocess.Popen[bytes]:
    """The load client in the background, in the machine's network namespace, until
    ``tmp/stop`` exists; its summary goes to ``tmp/load.json``."""
    argv = [
        "nsenter", f"--target={machine.leader}", "--net",
        sys.executable, "-m", "tests.packaging.stan_load", "load", URL, CLUSTER_ID,
        "--out", str(tmp / "load.json"), "--stop-file", str(tmp / "stop"),
        "--ready-file", str(tmp / "load.ready"), "--max-seconds", "1200",
    ]  # fmt: skip
    with open(tmp / "load.out", "wb") as out:
        load = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (tmp / "load.ready").exists():
        if load.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                load.kill()
            load.wait()
            raise AssertionError(f"the load got no PubAck:\n{(tmp / 'load.out').read_text()}")
        time.sleep(0.2)
    return load


def _stop_load(load: subprocess.Popen[bytes], tmp: Path) -> dict[str, Any]:
    (tmp / "stop").touch()
    try:
        load.wait(90)
    except subprocess.TimeoutExpired:
        load.kill()
        load.wait()
    output = (tmp / "load.out").read_text()
    assert load.returncode == 0 and (tmp / "load.json").exists(), output[-4000:]
    summary: dict[str, Any] = json.loads((tmp / "load.json").read_text())
    return summary


def _service(machine: Machine) -> dict[str, Any]:
    """The unit's main PID and automatic restarts, where its journal and log file end."""
    shown = machine.sh(f"systemctl show -p MainPID -p NRestarts {UNIT}")
    props = dict(line.split("=", 1) for line in shown.split())
    cursor = machine.sh(f"journalctl --no-pager -q -u {UNIT} -n 1 --show-cursor", check=False)
    found = re.search(r"^-- cursor: (\S+)", cursor, re.MULTILINE)
    size = machine.sh(f"stat -c %s {LOG_FILE} 2>/dev/null || echo 0").strip()
    return {
        "pid": props["MainPID"],
        "restarts": int(props["NRestarts"]),
        "cursor": found.group(1) if found else "",
        "log_size": int(size),
    }


def _since(machine: Machine, before: dict[str, Any]) -> tuple[str, str]:
    """The unit's journal and the server's log file since ``before`` (``_service``)."""
    after = f"--after-cursor '{before['cursor']}'" if before["cursor"] else ""
    journal = machine.sh(f"journalctl --no-pager -q -u {UNIT} {after}", check=False)
    log = machine.sh(f"tail -c +{before['log_size'] + 1} {LOG_FILE}", check=False)
    return journal, log


class PidWatch(threading.Thread):
    """Each node's MainPID of the unit, once a second: the PIDs it had, in order."""

    def __init__(self, machines: dict[str, Machine]) -> None:
        super().__init__(daemon=True)
        self.machines = machines
        self.pids: dict[str, list[str]] = {name: [] for name in machines}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for name, machine in self.machines.items():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    shown = machine.run(
                        ["systemctl", "show", "-p", "MainPID", "--value", UNIT],
                        check=False,
                        timeout=10,
                    ).stdout.strip()
                    seen = self.pids[name]
                    if shown not in ("", "0") and (not seen or seen[-1] != shown):
                        seen.append(shown)
            self.done.wait(1)

    def stop(self) -> dict[str, list[str]]:
        self.done.set()
        self.join(30)
        return self.pids


def test_rolling_restart_under_load_loses_no_acknowledged_message(
    machines: dict[str, Machine], deb_file: Path, tmp_path: Path
) -> None:
    inventory = _inventory(tmp_path, machines)
    extra = {
        "stanpkg_package_file": str(deb_file),
        "stanpkg_cluster_id": CLUSTER_ID,
        # Past a million messages (the default max_msgs) the oldest would be dropped.
        "stanpkg_channels": {"load": {"max_msgs": 0, "max_bytes": 0}},
    }
    converge = playbook(SITE, inventory=inventory, extra=extra, tmp=tmp_path)
    assert converge.returncode == 0, converge.stdout[-6000:] + converge.stderr[-2000:]
    leader = _wait_formed(machines)
    # The load's node: a follower at first (it is restarted in the middle of the play).
    host = next(h for h in HOSTS if h != leader)
    node = machines[host]

    started = time.monotonic()
    filled = _stan_load(
        node, "fill", URL, CLUSTER_ID, "--count", str(FILL), "--channels", str(FILL_CHANNELS),
        timeout=900,
    )  # fmt: skip
    print(f"\nfill: {filled['stored']} messages of 128 bytes in {FILL_CHANNELS} channels, "
          f"{filled['seconds']} s ({filled['per_second']}/s; {time.monotonic() - started:.0f} s "
          "with the client's start)")  # fmt: skip

    before = {name: _service(m) for name, m in machines.items()}
    load = _start_load(node, tmp_path)
    watch = PidWatch(machines)
    try:
        watch.start()
        rollout_from = time.time()
        started = time.monotonic()
        rolling = playbook(ROLLING, inventory=inventory, tmp=tmp_path)
        rollout_s = time.monotonic() - started
        time.sleep(3)  # the load goes on for a moment after the play
    finally:
        summary = _stop_load(load, tmp_path)
        pids = watch.stop()
    (tmp_path / "rolling.log").write_text(rolling.stdout)
    gap = float(summary["longest_gap_s"])
    gap_at = float(summary["longest_gap_from"]) - rollout_from
    sessions = summary["sessions"]
    print(
        f"rolling restart under load ({host}'s client; serving node {leader} at first): "
        f"{rollout_s:.0f} s, rc {rolling.returncode}; {summary['acked']} PubAcks "
        f"({summary['acked'] / max(1.0, summary['last_ack_at'] - summary['first_ack_at']):.0f}"
        f"/s), longest gap {gap:.2f} s at {gap_at:+.1f} s of the rollout; "
        f"{len(sessions)} sessions, {summary['resent']} resent, "
        f"{summary['ack_errors']} PubAck errors\n"
        f"gaps over 1 s (s, at): "
        f"{[(g, round(a - rollout_from, 1)) for g, a in summary['gaps_over_1s']]}\n"
        f"sessions: {json.dumps(sessions)}"
    )
    assert rolling.returncode == 0, rolling.stdout[-8000:] + rolling.stderr[-2000:]

    # Every acknowledged message is stored; the fill channels still end at their last.
    checked = _stan_load(
        node, "check", URL, CLUSTER_ID, "--summary", str(tmp_path / "load.json"),
        "--fill-channels", str(FILL_CHANNELS), timeout=900,
    )  # fmt: skip
    print(
        f"channel load read back in {checked['read_s']} s from sequence "
        f"{checked['first_sequence']}: {checked['received']} messages, {checked['distinct']} of "
        f"{checked['expected']} acknowledged; lost {checked['missing']} "
        f"{checked['missing_sample']}; fill channels end at {checked['fill_last']}"
    )
    assert checked["first_sequence"] == 1 and checked["missing"] == 0, checked
    per_channel = FILL // FILL_CHANNELS
    assert checked["fill_last"] == {f"fill.{k}": per_channel for k in range(FILL_CHANNELS)}

    assert gap <= LONGEST_GAP, f"{gap:.2f} s without a PubAck (at most {LONGEST_GAP} s)"

    # No crash loop: each node's service was restarted once, by the play.
    _wait_formed(machines, timeout=60)
    for name, machine in machines.items():
        after = _service(machine)
        journal, log = _since(machine, before[name])
        started_lines = re.findall(rf"Started (?:{UNIT}\.service|NATS Streaming server)", journal)
        fatal = [line for line in (journal + log).splitlines() if "[FTL]" in line]
        where = f"{name}: PIDs {pids[name]}, journal:\n{journal[-4000:]}"
        assert after["restarts"] == 0, where
        assert len(pids[name]) == 2 and pids[name][0] == before[name]["pid"], where
        assert after["pid"] == pids[name][-1], where
        assert len(started_lines) == 1 and "Scheduled restart job" not in journal, where
        assert not fatal, f"{name}: {fatal[:5]}"
