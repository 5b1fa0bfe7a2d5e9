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

from tests.ansible.ansible_run import PLAYBOOKS, playbook, recap
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


def test_cluster_peers_and_routes_come_from_the_inventory(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "stan": {
                            "hosts": {
                                "localhost": {"ansible_connection": "local"},
                                "node2": {"ansible_host": "10.9.0.2"},
                                "node3": {"stanpkg_cluster_node_id": "n3"},
                            }
                        }
                    }
                }
            }
        )
    )
    extra = _local_vars(tmp_path, stanpkg_cluster_group="stan")
    proc = playbook(
        PLAYBOOKS / "render.yml", inventory=inventory, extra=extra, tmp=tmp_path, timeout=300
    )
    # Only localhost is reachable; the others are just inventory for the derivation.
    assert "localhost" in proc.stdout and recap(proc.stdout).get("failed", 0) == 0, proc.stdout
    conf = (tmp_path / "etc" / "stan.conf").read_text()
    env = (tmp_path / "etc" / "stanpkg.env").read_text()
    assert 'node_id: "localhost"' in conf
    assert 'peers: ["localhost", "node2", "n3"]' in conf
    assert "--routes nats://10.9.0.2:6222,nats://node3:6222" in env
    assert "--cluster nats://0.0.0.0:6222" in env and "--cluster_name stan" in env
    check = _validate(tmp_path)
    assert check.returncode == 0, check.stderr
    assert "clustered" in check.stdout


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
