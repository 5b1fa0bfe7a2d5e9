"""The role's configuration tasks run locally (connection local): realistic variable sets
render a config that `stanpkg validate` accepts through the template module's validate:,
a broken one stops before the live file is touched, and every option variable lands where
the server reads it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.ansible_run import PLAYBOOKS, playbook
from tests.packaging.fixtures import ROOT

ROLE = ROOT / "ansible" / "roles" / "stanpkg"
TABLE = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["stanpkg_option_table"]
STANPKG = str(Path(sys.executable).parent / "stanpkg")


def _local_vars(tmp: Path, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "stanpkg_config_dir": str(tmp / "etc"),
        "stanpkg_group": "root",
        "stanpkg_bin": STANPKG,
        "stanpkg_dir": str(tmp / "data"),
        "stanpkg_nats_log_file": str(tmp / "stanpkg.log"),
        "ansible_python_interpreter": sys.executable,  # not the machine's pyenv shims
        "stanpkg_restart_on_change": False,  # no systemd here: config tasks only
    }
    base.update(overrides)
    (tmp / "etc").mkdir(exist_ok=True)
    return base


def _converge(tmp: Path, extra: dict[str, Any], inventory: str | Path = "localhost,") -> str:
    proc = playbook(
        PLAYBOOKS / "render.yml", inventory=inventory, extra=extra, tmp=tmp, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout


def _validate(tmp: Path) -> subprocess.CompletedProcess[str]:
    env_file = tmp / "etc" / "stanpkg.env"
    return subprocess.run(
        [
            "/bin/sh",
            "-c",
            'set -a && . "$1" && set +a && exec "$2" validate -sc "$0" $STANPKG_OPTS',
            str(tmp / "etc" / "stan.conf"),
            str(env_file),
            STANPKG,
        ],
        capture_output=True,
        text=True,
    )


def test_file_store_with_channels_partitioning_encryption(tmp_path: Path) -> None:
    extra = _local_vars(
        tmp_path,
        stanpkg_cluster_id="orders",
        stanpkg_limits_max_channels=50,
        stanpkg_limits_max_msgs=100000,
        stanpkg_limits_max_bytes="1GB",
        stanpkg_limits_max_age="72h",
        stanpkg_channels={
            "orders.>": {"max_msgs": 500, "max_age": "1h"},
            "audit.*": {"max_bytes": "10MB"},
            "metrics": None,
        },
        stanpkg_partitioning=True,
        stanpkg_file_options_compact_enabled=False,
        stanpkg_file_buffer_size="4MB",
        stanpkg_file_slice_max_msgs=1000,
        stanpkg_file_truncate_bad_eof=True,
        stanpkg_io_batch_size=512,
        stanpkg_encrypt=True,
        stanpkg_encryption_cipher="CHACHA",
        stanpkg_encryption_key="s3cret-key",
        stanpkg_hb_interval="10s",
        stanpkg_nats_extra_config={
            "max_payload": 2097152,
            "leafnodes": {"listen": "127.0.0.1:7422", "no_advertise": True},
        },
    )
    output = _converge(tmp_path, extra)
    assert "s3cret-key" not in output  # no_log
    conf = (tmp_path / "etc" / "stan.conf").read_text()
    env = (tmp_path / "etc" / "stanpkg.env").read_text()
    assert '"orders.>" {' in conf and "max_bytes: 10MB" in conf
    assert "s3cret-key" not in conf and "NATS_STREAMING_ENCRYPTION_KEY='s3cret-key'" in env
    assert "--io_batch_size 512" in env and "--file_truncate_bad_eof=true" in env
    assert "max_payload: 2097152" in conf and 'listen: "127.0.0.1:7422"' in conf
    check = _validate(tmp_path)
    assert check.returncode == 0, check.stderr
    assert "3 channels configured" in check.stdout


def test_ft_group_with_sql_store(tmp_path: Path) -> None:
    extra = _local_vars(
        tmp_path,
        stanpkg_store_type="SQL",
        stanpkg_dir=None,
        stanpkg_sql_driver="postgres",
        stanpkg_sql_source="dbname=stan user=stan password=pw host=db.example",
        stanpkg_sql_no_caching=True,
        stanpkg_sql_max_open_conns=8,
        stanpkg_ft_group="stan-ft",
    )
    _converge(tmp_path, extra)
    conf = (tmp_path / "etc" / "stan.conf").read_text()
    assert 'ft_group: "stan-ft"' in conf and "sql_options {" in conf
    assert _validate(tmp_path).returncode == 0


def _cluster_inventory(tmp: Path, node_ids: dict[str, str | None]) -> Path:
    """Three hosts of one cluster group, each rendered locally into its own directory,
    with the ports of three nodes on one machine."""
    hosts: dict[str, dict[str, Any]] = {}
    for number, (host, node_id) in enumerate(node_ids.items(), 1):
        home = tmp / host
        (home / "etc").mkdir(parents=True, exist_ok=True)
        hosts[host] = {
            "ansible_connection": "local",
            "stanpkg_cluster_address": "127.0.0.1",
            "stanpkg_nats_cluster_port": 6240 + number,
            "stanpkg_nats_port": 4240 + number,
            "stanpkg_nats_http_port": 8240 + number,
            "stanpkg_config_dir": str(home / "etc"),
            "stanpkg_dir": str(home / "store"),
            "stanpkg_cluster_log_path": str(home / "raft"),
            "stanpkg_nats_log_file": str(home / "stanpkg.log"),
        }
        if node_id is not None:
            hosts[host]["stanpkg_cluster_node_id"] = node_id
    inventory = tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"stan": {"hosts": hosts}}}}))
    return inventory


def _cluster_vars(tmp: Path) -> dict[str, Any]:
    return {
        "stanpkg_group": "root",
        "stanpkg_bin": STANPKG,
        "ansible_python_interpreter": sys.executable,
        "stanpkg_restart_on_change": False,
        "stanpkg_cluster_group": "stan",
        "stanpkg_cluster_id": "orders",
        "render_hosts": "stan",
    }


def test_cluster_of_three_from_the_inventory(tmp_path: Path) -> None:
    ids = {"stan-a": None, "stan-b": None, "stan-c": "node-c"}
    inventory = _cluster_inventory(tmp_path, ids)
    _converge(tmp_path, _cluster_vars(tmp_path), inventory=inventory)
    expected = {"stan-a": "stan-a", "stan-b": "stan-b", "stan-c": "node-c"}
    for number, host in enumerate(ids, 1):
        conf = (tmp_path / host / "etc" / "stan.conf").read_text()
        env = (tmp_path / host / "etc" / "stanpkg.env").read_text()
        others = [h for h in ids if h != host]
        peers = ", ".join(f'"{expected[h]}"' for h in others)
        routes = ", ".join(f'"nats://127.0.0.1:{6240 + list(ids).index(h) + 1}"' for h in others)
        assert f'node_id: "{expected[host]}"' in conf, conf
        assert f"peers: [{peers}]" in conf, conf
        assert f'log_path: "{tmp_path / host / "raft"}"' in conf
        # The NATS cluster block at the top level, before streaming { }.
        nats = conf.split("streaming {", 1)[0]
        assert f'listen: "0.0.0.0:{6240 + number}"' in nats, conf
        assert f"routes: [{routes}]" in nats, conf
        assert "--cluster" not in env and "--routes" not in env  # in the file, not flags
        check = _validate(tmp_path / host)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "clustered" in check.stdout


def test_cluster_with_a_duplicated_node_id_stops_in_the_checks(tmp_path: Path) -> None:
    inventory = _cluster_inventory(tmp_path, {"stan-a": None, "stan-b": "stan-a", "stan-c": None})
    proc = playbook(
        PLAYBOOKS / "render.yml",
        inventory=inventory,
        extra=_cluster_vars(tmp_path),
        tmp=tmp_path,
        timeout=300,
    )
    assert proc.returncode != 0
    failed = proc.stdout.split(
        "TASK [stanpkg : Check every node of the cluster has its own node ID]"
    )[1]
    assert 'node ID(s) used by more than one host: "stan-a" (stan-a, stan-b)' in failed, failed
    assert "Give each host its own stanpkg_cluster_node_id" in failed
    assert "Write the configuration" not in proc.stdout  # stopped before any file
    assert not any((tmp_path / h / "etc" / "stan.conf").exists() for h in ("stan-a", "stan-b"))


def test_cluster_routes_and_listen_can_be_given(tmp_path: Path) -> None:
    inventory = _cluster_inventory(tmp_path, {"stan-a": None, "stan-b": None, "stan-c": None})
    extra = {
        **_cluster_vars(tmp_path),
        "render_hosts": "stan-a",
        "stanpkg_nats_routes": ["nats://10.0.0.2:7222", "nats://10.0.0.3:7222"],
        "stanpkg_nats_cluster_listen": "10.0.0.1:7222",
        "stanpkg_nats_cluster_name": "stan-orders",
    }
    _converge(tmp_path, extra, inventory=inventory)
    conf = (tmp_path / "stan-a" / "etc" / "stan.conf").read_text()
    assert 'name: "stan-orders"' in conf and 'listen: "10.0.0.1:7222"' in conf
    assert 'routes: ["nats://10.0.0.2:7222", "nats://10.0.0.3:7222"]' in conf
    assert _validate(tmp_path / "stan-a").returncode == 0


def test_broken_variables_never_reach_the_live_config(tmp_path: Path) -> None:
    _converge(tmp_path, _local_vars(tmp_path))
    live = tmp_path / "etc" / "stan.conf"
    before = live.read_bytes()
    broken = _local_vars(
        tmp_path, stanpkg_limits_max_msgs=-5, stanpkg_channels={"bad..subject": {"max_msgs": 1}}
    )
    proc = playbook(PLAYBOOKS / "render.yml", extra=broken, tmp=tmp_path, timeout=300)
    assert proc.returncode != 0
    assert "failed to validate" in proc.stdout, proc.stdout[-3000:]
    # stanpkg validate's compiler-style diagnostics are shown.
    assert "error: max messages limit cannot be negative (-5)" in proc.stdout
    assert live.read_bytes() == before
    assert not list((tmp_path / "etc").glob("stan.conf.*"))  # no half-written file left


def test_unknown_channel_limit_is_refused(tmp_path: Path) -> None:
    extra = _local_vars(tmp_path, stanpkg_channels={"a": {"max_msg": 1}})
    proc = playbook(
        ROOT / "ansible" / "playbooks" / "site.yml",
        extra={
            **extra,
            "stanpkg_hosts": "localhost",
            "ansible_connection": "local",
            "stanpkg_install_method": "pip",
        },
        tmp=tmp_path,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "unknown limit(s)" in proc.stdout and "max_msg" in proc.stdout


def test_rolling_restart_shows_why_the_live_config_does_not_validate(tmp_path: Path) -> None:
    """No no_log on validate: the operator sees stanpkg validate's diagnostics."""
    conf = tmp_path / "stan.conf"
    conf.write_text("streaming {\n  store_limits { max_msgs: -5 }\n}\n")
    extra = {
        "stanpkg_config_file": str(conf),
        "stanpkg_env_file": str(tmp_path / "absent.env"),
        "stanpkg_bin": STANPKG,
        "ansible_python_interpreter": sys.executable,
    }
    proc = playbook(PLAYBOOKS / "validate_live.yml", extra=extra, tmp=tmp_path, timeout=300)
    assert proc.returncode != 0
    assert "censored" not in proc.stdout
    assert f"{conf}:2:28: error: max messages limit cannot be negative (-5)" in proc.stdout, (
        proc.stdout[-3000:]
    )


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"stanpkg_install_method": "snap"}, "value of stanpkg_install_method must be one of"),
        ({"stanpkg_limits_max_msgs": "lots"}, "stanpkg_limits_max_msgs"),
    ],
)
def test_argument_specs_are_checked_when_the_role_starts(
    tmp_path: Path, variables: dict[str, Any], message: str
) -> None:
    """meta/argument_specs.yml: ansible-core refuses a wrong type or choice before any task."""
    extra = {
        **_local_vars(tmp_path),
        **variables,
        "stanpkg_hosts": "localhost",
        "ansible_connection": "local",
    }
    proc = playbook(ROOT / "ansible" / "playbooks" / "site.yml", extra=extra, tmp=tmp_path)
    assert proc.returncode != 0
    assert "Validation of arguments failed" in proc.stdout, proc.stdout[-3000:]
    assert message in proc.stdout, proc.stdout[-3000:]
    assert "Check the install method" not in proc.stdout  # stopped before the role's tasks


SAMPLES = {"bool": True, "int": 7, "size": "3MB", "duration": "2s", "strings": ["a", "b"]}


def test_every_option_variable_is_written(tmp_path: Path) -> None:
    """Each option variable, when set, appears in the file (in its section) or as its flag."""
    extra: dict[str, Any] = {"out_dir": str(tmp_path), "ansible_python_interpreter": sys.executable}
    for entry in TABLE:
        extra[entry["var"]] = SAMPLES.get(entry["kind"], f"v-{entry['key'] or 'x'}")
    proc = playbook(PLAYBOOKS / "render_raw.yml", extra=extra, tmp=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
    conf = (tmp_path / "stan.conf").read_text()
    env = (tmp_path / "stanpkg.env").read_text()
    streaming = conf.split("streaming {", 1)[1]
    top = conf.split("streaming {", 1)[0]
    for entry in TABLE:
        key, mode, section = entry["key"], entry["mode"], entry["section"]
        if mode == "nats":
            assert re.search(rf"(?m)^{re.escape(key)}: ", top), key
        elif mode == "streaming":
            where = (
                streaming.split(f"  {section} {{", 1)[1].split("\n  }", 1)[0]
                if section
                else streaming
            )
            assert re.search(rf"(?m)^\s+{re.escape(key)}: ", where), (section, key)
        elif mode == "flag":
            assert re.search(rf"{re.escape(key)}[= ]", env), key
        else:
            assert "NATS_STREAMING_ENCRYPTION_KEY=" in env
    shutil.rmtree(tmp_path / "etc", ignore_errors=True)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_samples_cover_every_kind(kind: str) -> None:
    assert any(e["kind"] == kind for e in TABLE)
