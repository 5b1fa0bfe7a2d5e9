"""The Windows service wrapper's logic (windows/service/stanpkg_winsvc/logic.py), on Linux:
names, the registered command line, sc.exe calls, -sl quit=<service>, control handling."""

from __future__ import annotations

import shlex
import sys

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
    create, description, failure, flag = logic.sc_create(SPEC)
    assert create[:3] == ["sc.exe", "create", "stan-a"]
    assert create[create.index("binPath=") + 1] == logic.binpath(SPEC)
    assert create[create.index("start=") + 1] == "auto"
    assert "stan.conf" in description[-1]
    assert failure[failure.index("actions=") + 1].startswith("restart/")
    assert flag == ["sc.exe", "failureflag", "stan-a", "1"]
    assert logic.sc_delete("stan-a") == ["sc.exe", "delete", "stan-a"]


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
