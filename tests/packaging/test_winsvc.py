"""The Windows service wrapper's logic (windows/service/stanpkg_winsvc/logic.py), on Linux:
names, the registered command line, sc.exe calls, the virtual service account and the
install folder's ACL, the remembered names, -sl quit=<service>, control handling."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.packaging.fixtures import ROOT

sys.path.insert(0, str(ROOT / "windows" / "service"))
from stanpkg_winsvc import logic
from stanpkg_winsvc.__main__ import main as cli_main

SPEC = logic.ServiceSpec(
    name="stan-a",
    python=r"C:\Python311\python.exe",
    venv=r"C:\ProgramData\stanpkg\venv",
    config=r"C:\ProgramData\stanpkg\my conf\stan.conf",
    syslog_name="stan-a",
)


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("quit=stan-a", ("quit", "stan-a")),
        ("stop", ("stop", "nats-streaming-server")),
        ("REOPEN=svc", ("reopen", "svc")),
        ("ldm=svc", ("ldm", "svc")),
    ],
)
def test_parse_signal(arg: str, expected: tuple[str, str]) -> None:
    assert logic.parse_signal(arg) == expected


@pytest.mark.parametrize("arg", ["bogus=x", "quit=1234", ""])
def test_parse_signal_rejects(arg: str) -> None:
    with pytest.raises(logic.UsageError):
        logic.parse_signal(arg)


def test_control_codes_follow_the_reference() -> None:
    assert logic.control_code("quit") == logic.control_code("stop") == 1
    assert logic.control_code("reopen") == 128
    assert logic.control_code("ldm") == 129


def test_service_name_rules() -> None:
    assert logic.service_name(None, None) == "nats-streaming-server"
    assert logic.service_name("", "stan-b") == "stan-b"  # several servers: one per syslog name
    assert logic.service_name("explicit", "stan-b") == "explicit"
    with pytest.raises(logic.UsageError):
        logic.service_name('bad"name', None)


def test_binpath_runs_the_base_interpreter_with_the_host_script() -> None:
    line = logic.binpath(SPEC)
    # Quoted by the MSVC rules: the path with a space stays one argument.
    assert line.startswith(r"C:\Python311\python.exe C:\ProgramData\stanpkg\venv\Lib")
    assert r'"C:\ProgramData\stanpkg\my conf\stan.conf"' in line
    argv = logic.host_command(SPEC)
    host = logic.parse_host_args(argv[2:])
    assert host.service_name == "stan-a"
    assert host.server_args == ("run", "-sc", SPEC.config, "--syslog_name", "stan-a")
    assert argv[1].endswith(r"site-packages\stanpkg_winsvc\host.py")


def test_child_runs_stanpkg_from_the_venv() -> None:
    cmd = logic.child_command(SPEC)
    assert cmd[:3] == [r"C:\ProgramData\stanpkg\venv\Scripts\python.exe", "-m", "stanpkg.cli"]
    assert cmd[3:] == ["run", "-sc", SPEC.config, "--syslog_name", "stan-a"]
    assert logic.forward_command(cmd, "reopen", 42)[3:] == ["run", "-sl", "reopen=42"]


def test_sc_calls() -> None:
    create, description, failure, flag, sidtype, account = logic.sc_create(SPEC)
    assert create[:3] == ["sc.exe", "create", "stan-a"]
    assert create[create.index("binPath=") + 1] == logic.binpath(SPEC)
    assert create[create.index("start=") + 1] == "auto"
    assert "stan.conf" in description[-1]
    assert failure[failure.index("actions=") + 1].startswith("restart/")
    assert flag == ["sc.exe", "failureflag", "stan-a", "1"]
    assert logic.sc_delete("stan-a") == ["sc.exe", "delete", "stan-a"]
    # Not LocalSystem: the service's own virtual account (which needs the service SID).
    assert sidtype == ["sc.exe", "sidtype", "stan-a", "unrestricted"]
    assert account == ["sc.exe", "config", "stan-a", "obj=", r"NT SERVICE\stan-a"]
    assert "obj=" not in create  # the account is set once the service exists


def test_install_folder_is_locked_down_for_the_service_account() -> None:
    root, account = r"C:\ProgramData\stanpkg", r"NT SERVICE\stan-a"
    assert SPEC.install_root == root
    calls = logic.icacls_lockdown(SPEC)
    lock = calls[0]
    assert lock[:3] == ["icacls", root, "/inheritance:r"]  # nothing from %ProgramData%
    grants = lock[lock.index("/grant:r") + 1 : lock.index("/Q")]
    assert grants == [
        "*S-1-5-32-544:(OI)(CI)F",  # Administrators
        "*S-1-5-18:(OI)(CI)F",  # SYSTEM
        f"{account}:(OI)(CI)RX",
    ]
    # Write access only where the server writes (the config is under the root here).
    assert calls[1:] == [
        ["icacls", rf"{root}\data", "/grant:r", f"{account}:(OI)(CI)M", "/Q"],
        ["icacls", rf"{root}\log", "/grant:r", f"{account}:(OI)(CI)M", "/Q"],
    ]
    assert not [arg for call in calls for arg in call if "Users" in arg or "Everyone" in arg]


def test_a_config_outside_the_install_folder_is_made_readable() -> None:
    outside = logic.ServiceSpec("stan-b", SPEC.python, SPEC.venv, r"D:\stan\b.conf")
    assert logic.icacls_lockdown(outside)[-1] == [
        "icacls",
        r"D:\stan\b.conf",
        "/grant:r",
        r"NT SERVICE\stan-b:R",
        "/Q",
    ]
    # Case and a trailing separator do not fool the containment check.
    inside = logic.ServiceSpec("x", SPEC.python, SPEC.venv, r"c:\programdata\STANPKG\a.conf")
    assert len(logic.icacls_lockdown(inside)) == 3
    sibling = logic.ServiceSpec("x", SPEC.python, SPEC.venv, r"C:\ProgramData\stanpkg2\a.conf")
    assert len(logic.icacls_lockdown(sibling)) == 4


DEFAULT_CONF = r"C:\ProgramData\stanpkg\stan.conf"


def test_first_install_takes_the_parameters_or_the_defaults() -> None:
    plan = logic.plan_install({}, None, DEFAULT_CONF)
    assert plan == logic.InstallPlan(
        logic.Settings("nats-streaming-server", "", DEFAULT_CONF), replaces=""
    )
    plan = logic.plan_install({"SyslogName": "stan-a", "Config": r"D:\a.conf"}, None, DEFAULT_CONF)
    assert plan.settings == logic.Settings("stan-a", "stan-a", r"D:\a.conf")


def test_upgrade_without_parameters_keeps_the_custom_names() -> None:
    remembered = logic.Settings("stan-a", "stan-a", r"D:\a.conf")
    plan = logic.plan_install({}, remembered, DEFAULT_CONF)
    assert plan == logic.InstallPlan(remembered, replaces="")
    # Only the config given: names still remembered.
    plan = logic.plan_install({"Config": r"D:\b.conf"}, remembered, DEFAULT_CONF)
    assert plan.settings == logic.Settings("stan-a", "stan-a", r"D:\b.conf")


def test_upgrade_with_a_new_name_replaces_the_old_service() -> None:
    remembered = logic.Settings("stan-a", "stan-a", DEFAULT_CONF)
    plan = logic.plan_install({"ServiceName": "stan-b"}, remembered, DEFAULT_CONF)
    assert plan.settings.service_name == "stan-b" and plan.replaces == "stan-a"
    # Same name in another case is the same Windows service.
    assert logic.plan_install({"ServiceName": "STAN-A"}, remembered, DEFAULT_CONF).replaces == ""


def test_uninstall_finds_the_remembered_service() -> None:
    remembered = logic.Settings("stan-a", "stan-a", DEFAULT_CONF)
    assert logic.services_to_remove({}, remembered) == ["stan-a", "nats-streaming-server"]
    assert logic.services_to_remove({}, None) == ["nats-streaming-server"]
    assert logic.services_to_remove({"ServiceName": "x", "SyslogName": "X"}, remembered) == [
        "x",
        "stan-a",
        "nats-streaming-server",
    ]


def test_settings_round_trip_and_garbage() -> None:
    settings = logic.Settings("stan-a", "", r"D:\a.conf")
    assert logic.parse_settings(logic.settings_json(settings)) == settings
    for text in (None, "", "not json", "[]", '{"config": "x"}', '{"service_name": ""}'):
        assert logic.parse_settings(text) is None, text
    assert logic.state_path(SPEC.install_root) == r"C:\ProgramData\stanpkg\service.json"


def test_cli_plans_what_the_chocolatey_scripts_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "service.json"
    # Empty parameters arrive as --name= (PowerShell drops empty native arguments).
    args = ["--state", str(state), "--service-name=", "--syslog-name=stan-a"]
    assert cli_main(["plan-install", *args, "--config=", "--default-config", DEFAULT_CONF]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned == {
        "service_name": "stan-a",
        "syslog_name": "stan-a",
        "config": DEFAULT_CONF,
        "replaces": "",
    }
    state.write_text(logic.settings_json(logic.Settings("stan-a", "stan-a", DEFAULT_CONF)))
    bare = ["--state", str(state), "--service-name=", "--syslog-name="]
    assert cli_main(["plan-install", *bare, "--config=", "--default-config", "C:\\x"]) == 0
    assert json.loads(capsys.readouterr().out)["service_name"] == "stan-a"
    assert cli_main(["plan-uninstall", *bare]) == 0
    assert capsys.readouterr().out.split() == ["stan-a", "nats-streaming-server"]


def test_controls_map_to_actions() -> None:
    assert logic.on_control(1) == logic.Action("stop", grace=logic.STOP_GRACE)
    assert logic.on_control(5).kind == "stop"  # system shutdown
    assert logic.on_control(128) == logic.Action("signal", "reopen")
    assert logic.on_control(129) == logic.Action("signal", "ldm")
    assert logic.on_control(4).kind == "ignore"  # interrogate


def test_stop_sequence_is_graceful_first() -> None:
    assert logic.stop_step(True, None, 0.0, 30) == "break"
    assert logic.stop_step(True, 0.0, 10.0, 30) == "wait"
    assert logic.stop_step(True, 0.0, 30.0, 30) == "kill"
    assert logic.stop_step(False, 0.0, 1.0, 30) == "done"


def test_exit_status_reports_unexpected_exits_as_failures() -> None:
    assert logic.exit_status(0, stopping=True) == (False, 0)
    assert logic.exit_status(3, stopping=False) == (True, 3)
    assert logic.exit_status(0, stopping=False) == (True, 1)  # exited without being asked


def test_host_args_errors() -> None:
    with pytest.raises(logic.UsageError):
        logic.parse_host_args(["--service-name", "x"])
    with pytest.raises(logic.UsageError):
        logic.parse_host_args(["--bogus"])


def test_cli_binpath_needs_no_windows(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(
        [
            "binpath",
            "--syslog-name",
            "stan-a",
            "--python",
            SPEC.python,
            "--venv",
            SPEC.venv,
            "--config",
            SPEC.config,
        ]
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == logic.binpath(SPEC)
    assert shlex.split(logic.binpath(SPEC).replace("\\", "/"))[0] == "C:/Python311/python.exe"
