"""What the Windows service does, as pure functions (tested on Linux).

The service host (``winservice.py``, the thin pywin32 layer) asks these functions what to
run, how to register it and what to do on each Service Control Manager request; it only
carries out the answers.

Model: the service runs ``stanpkg run`` as a child process (a separate process group with
the service's hidden console, so a CTRL_BREAK reaches it as a graceful stop, like SIGTERM
on Unix), waits for it, and maps SCM controls to the reference server's: stop, a reopen
of the log file (control 128), lame-duck mode (129), as nats-server's Windows service does.
``nats-streaming-server -sl quit=<service>`` sends those controls by service name.
"""

from __future__ import annotations

import ntpath
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

DEFAULT_SERVICE = "nats-streaming-server"
DISPLAY_NAME = "NATS Streaming Server (stanpkg)"
DESCRIPTION = "NATS Streaming (STAN) server, run by stanpkg. Config: {config}"

# Service control codes (winsvc.h) and nats-server's user-defined ones.
SERVICE_CONTROL_STOP = 1
SERVICE_CONTROL_PARAMCHANGE = 6
SERVICE_CONTROL_SHUTDOWN = 5
REOPEN_LOG_CODE = 128
LAME_DUCK_CODE = 129

# ``-sl`` commands -> the control code sent to the service (the reference's table).
SIGNAL_CONTROLS: dict[str, int] = {
    "stop": SERVICE_CONTROL_STOP,
    "quit": SERVICE_CONTROL_STOP,
    "term": SERVICE_CONTROL_STOP,
    "reopen": REOPEN_LOG_CODE,
    "reload": SERVICE_CONTROL_PARAMCHANGE,
    "ldm": LAME_DUCK_CODE,
}


class UsageError(ValueError):
    pass


def parse_signal(arg: str) -> tuple[str, str]:
    """``quit=stanpkg`` -> ("quit", "stanpkg"); the service defaults to the reference's name."""
    command, _, target = arg.partition("=")
    command = command.strip().lower()
    if command not in SIGNAL_CONTROLS:
        known = "|".join(sorted(SIGNAL_CONTROLS))
        raise UsageError(f'unknown signal "{command}" (want {known})')
    target = target.strip()
    if target.isdigit():
        raise UsageError("on Windows, -sl takes a service name, not a PID")
    return command, target or DEFAULT_SERVICE


def control_code(command: str) -> int:
    return SIGNAL_CONTROLS[command]


def service_name(requested: str | None, syslog_name: str | None) -> str:
    """The service's name: as asked, else the syslog name (several servers on one host each
    have their own event source and service), else the reference server's name."""
    for name in (requested, syslog_name):
        if name:
            if any(c in name for c in '/\\"'):
                raise UsageError(f"invalid service name {name!r}")
            return name
    return DEFAULT_SERVICE


@dataclass(frozen=True)
class ServiceSpec:
    """Everything needed to register and run one service."""

    name: str
    python: str  # the base interpreter (not a venv launcher: see host_command)
    venv: str
    config: str
    syslog_name: str = ""
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def site_packages(self) -> str:
        return ntpath.join(self.venv, "Lib", "site-packages")

    @property
    def host_script(self) -> str:
        return ntpath.join(self.site_packages, "stanpkg_winsvc", "host.py")


def server_args(spec: ServiceSpec) -> list[str]:
    """The server's own arguments: config, the event-log source name, extra flags."""
    args = ["run", "-sc", spec.config]
    if spec.syslog_name:
        args += ["--syslog_name", spec.syslog_name]
    return args + list(spec.extra_args)


def child_command(spec: ServiceSpec) -> list[str]:
    """The child process the service runs: the venv's stanpkg, as ``python -m``."""
    python = ntpath.join(spec.venv, "Scripts", "python.exe")
    return [python, "-m", "stanpkg.cli", *server_args(spec)]


def host_command(spec: ServiceSpec) -> list[str]:
    """What the SCM starts. The base interpreter runs host.py directly: a venv's python.exe
    is a launcher that re-executes the base interpreter as a child, and the SCM only talks
    to the process it started (StartServiceCtrlDispatcher fails in the child)."""
    return [
        spec.python,
        spec.host_script,
        "--service-name",
        spec.name,
        "--venv",
        spec.venv,
        "--",
        *server_args(spec),
    ]


def binpath(spec: ServiceSpec) -> str:
    """The registry's ImagePath: one command line, quoted by the MSVC runtime's rules."""
    return subprocess.list2cmdline(host_command(spec))


def sc_create(spec: ServiceSpec) -> list[list[str]]:
    """The sc.exe calls that register the service (sc.exe wants ``key=`` and the value as
    two arguments). Automatic start, restart on failure like the unit's Restart=on-failure."""
    name = spec.name
    return [
        [
            "sc.exe",
            "create",
            name,
            "binPath=",
            binpath(spec),
            "start=",
            "auto",
            "DisplayName=",
            DISPLAY_NAME if name == DEFAULT_SERVICE else f"{DISPLAY_NAME} {name}",
        ],
        ["sc.exe", "description", name, DESCRIPTION.format(config=spec.config)],
        [
            "sc.exe",
            "failure",
            name,
            "reset=",
            "86400",
            "actions=",
            "restart/5000/restart/5000/restart/30000",
        ],
        # Failure actions also when the server exits non-zero, not only when it crashes.
        ["sc.exe", "failureflag", name, "1"],
    ]


def sc_delete(name: str) -> list[str]:
    return ["sc.exe", "delete", name]


@dataclass(frozen=True)
class HostArgs:
    service_name: str
    venv: str
    server_args: tuple[str, ...]


def parse_host_args(argv: Sequence[str]) -> HostArgs:
    """host.py's command line (what ``host_command`` wrote)."""
    name, venv = DEFAULT_SERVICE, ""
    args = list(argv)
    rest: list[str] = []
    while args:
        arg = args.pop(0)
        if arg == "--":
            rest = args
            break
        if arg in ("--service-name", "--venv") and args:
            value = args.pop(0)
            if arg == "--service-name":
                name = value
            else:
                venv = value
        else:
            raise UsageError(f"unexpected argument {arg!r}")
    if not venv:
        raise UsageError("--venv is required")
    return HostArgs(name, venv, tuple(rest))


# --- what to do on each control -------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """``kind``: "stop" (graceful, then forced after ``grace`` seconds), "signal" (forward
    ``-sl command`` to the child), "ignore"."""

    kind: str
    command: str = ""
    grace: float = 0.0


STOP_GRACE = 30.0  # as the unit's TimeoutStopSec


def on_control(code: int) -> Action:
    if code in (SERVICE_CONTROL_STOP, SERVICE_CONTROL_SHUTDOWN):
        return Action("stop", grace=STOP_GRACE)
    if code == REOPEN_LOG_CODE:
        return Action("signal", "reopen")
    if code == LAME_DUCK_CODE:
        return Action("signal", "ldm")
    if code == SERVICE_CONTROL_PARAMCHANGE:
        return Action("signal", "reload")
    return Action("ignore")


def stop_step(child_running: bool, broke_at: float | None, now: float, grace: float) -> str:
    """One step of stopping the child: "done"; "break" first (CTRL_BREAK, the graceful stop,
    as SIGTERM on Unix); then "wait", or "kill" once ``grace`` seconds have passed."""
    if not child_running:
        return "done"
    if broke_at is None:
        return "break"
    return "kill" if now - broke_at >= grace else "wait"


def forward_command(child: Sequence[str], command: str, pid: int) -> list[str]:
    """``stanpkg run -sl COMMAND=PID`` with the child's interpreter: how a control other than
    stop reaches the server."""
    return [*child[:3], "run", "-sl", f"{command}={pid}"]


def exit_status(child_code: int | None, stopping: bool) -> tuple[bool, int]:
    """(failed, code) reported to the SCM when the child ends: an exit the service did not
    ask for is a failure (so the recovery actions restart it)."""
    if stopping:
        return False, 0
    code = 1 if child_code is None else child_code
    return True, code if code != 0 else 1
