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

import json
import ntpath
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

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

    @property
    def install_root(self) -> str:
        """%ProgramData%\\stanpkg: the venv, the config, data, logs and the state file."""
        return ntpath.dirname(self.venv.rstrip("\\"))

    @property
    def account(self) -> str:
        return service_account(self.name)


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


def service_account(name: str) -> str:
    """The service's virtual account: its own identity, no password, no rights beyond
    what the install grants it (not LocalSystem, which owns the machine)."""
    return f"NT SERVICE\\{name}"


def sc_create(spec: ServiceSpec) -> list[list[str]]:
    """The sc.exe calls that register the service (sc.exe wants ``key=`` and the value as
    two arguments). Automatic start, restart on failure like the unit's Restart=on-failure;
    run as the virtual account ``NT SERVICE\\<name>`` (a virtual account needs the
    service SID, hence sidtype unrestricted, set before the account)."""
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
        ["sc.exe", "sidtype", name, "unrestricted"],
        ["sc.exe", "config", name, "obj=", spec.account],
    ]


# Well-known SIDs (icacls takes "*SID"): the same on every Windows language.
ADMINISTRATORS = "*S-1-5-32-544"
LOCAL_SYSTEM = "*S-1-5-18"
WRITABLE_DIRS = ("data", "log")  # under the install root: the default store and log


def icacls_lockdown(spec: ServiceSpec) -> list[list[str]]:
    """The icacls calls that make the install root private: no inherited access (under
    %ProgramData% every user may create files, and the service would run them);
    Administrators and SYSTEM full control, the service account read and execute, and
    modify on the data and log folders only. A config outside the root is made readable
    by the account. Children inherit the new ACL (icacls propagates it)."""
    root, account = spec.install_root, spec.account
    inherit = "(OI)(CI)"
    calls = [
        [
            "icacls",
            root,
            "/inheritance:r",
            "/grant:r",
            f"{ADMINISTRATORS}:{inherit}F",
            f"{LOCAL_SYSTEM}:{inherit}F",
            f"{account}:{inherit}RX",
            "/Q",
        ]
    ]
    for folder in WRITABLE_DIRS:
        calls.append(
            ["icacls", ntpath.join(root, folder), "/grant:r", f"{account}:{inherit}M", "/Q"]
        )
    if not _is_under(spec.config, root):
        calls.append(["icacls", spec.config, "/grant:r", f"{account}:R", "/Q"])
    return calls


def _is_under(path: str, root: str) -> bool:
    path, root = ntpath.normcase(ntpath.normpath(path)), ntpath.normcase(ntpath.normpath(root))
    return path.startswith(root.rstrip("\\") + "\\")


# --- what an install remembers (upgrade and uninstall find the service by it) ----------

STATE_FILE = "service.json"  # in the install root


@dataclass(frozen=True)
class Settings:
    service_name: str
    syslog_name: str
    config: str


def state_path(install_root: str) -> str:
    return ntpath.join(install_root, STATE_FILE)


def settings_json(settings: Settings) -> str:
    return json.dumps(asdict(settings), indent=2) + "\n"


def parse_settings(text: str | None) -> Settings | None:
    """The remembered settings; None when absent or unreadable (then the defaults apply,
    as before anything was remembered)."""
    if not text:
        return None
    try:
        data = json.loads(text)
        settings = Settings(
            str(data["service_name"]), str(data.get("syslog_name", "")), str(data["config"])
        )
    except (ValueError, KeyError, TypeError):
        return None
    return settings if settings.service_name else None


@dataclass(frozen=True)
class InstallPlan:
    settings: Settings
    replaces: str  # a previously installed service of another name to remove, or ""


def plan_install(
    params: Mapping[str, str], remembered: Settings | None, default_config: str
) -> InstallPlan:
    """The names and config of this install from the package parameters (/ServiceName,
    /SyslogName, /Config), else what the previous install remembered, else the defaults.
    Naming either parameter renames the service: the old one is removed."""
    asked_service, asked_syslog = params.get("ServiceName", ""), params.get("SyslogName", "")
    if asked_service or asked_syslog or remembered is None:
        name = service_name(asked_service, asked_syslog)
        syslog = asked_syslog
    else:
        name, syslog = remembered.service_name, remembered.syslog_name
    config = params.get("Config", "") or (remembered.config if remembered else default_config)
    replaces = ""
    if remembered is not None and remembered.service_name.lower() != name.lower():
        replaces = remembered.service_name
    return InstallPlan(Settings(name, syslog, config), replaces)


def services_to_remove(params: Mapping[str, str], remembered: Settings | None) -> list[str]:
    """What an uninstall stops and removes: the names given, the remembered one, and the
    default (an install from before names were remembered); each once."""
    names = [params.get("ServiceName", ""), params.get("SyslogName", "")]
    names += [remembered.service_name if remembered else "", DEFAULT_SERVICE]
    seen: dict[str, str] = {}
    for name in names:
        if name and name.lower() not in seen:
            seen[name.lower()] = name
    return list(seen.values())


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
