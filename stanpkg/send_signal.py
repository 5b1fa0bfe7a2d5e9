"""``-sl``: signal a running streaming server (a PID, a pid file, the only one running, or
on Windows a service), as the reference's ``nats-streaming-server -sl``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

__all__ = ["send_signal", "windows_service_target"]

_SIGNALS = {
    "stop": signal.SIGKILL,
    "quit": signal.SIGINT,
    "term": signal.SIGTERM,
    "reopen": signal.SIGUSR1,
    "reload": signal.SIGHUP,
    "ldm": signal.SIGUSR2,
}


def _running_servers() -> list[int]:
    """PIDs of other processes that look like a streaming server (Linux /proc)."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(entry.name)
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if pid == me or not argv:
            continue
        words = [os.path.basename(a.decode(errors="replace")) for a in argv if a]
        if "nats-streaming-server" in words or ("stanpkg" in words and "run" in words):
            found.append(pid)
    return sorted(found)


def _resolve_pid(target: str) -> int:
    if target.isdigit():
        return int(target)
    try:
        text = Path(target).read_text(encoding="ascii").strip()
    except OSError as exc:
        raise ValueError(f"unable to read pid file {target}: {exc.strerror}") from None
    if not text.isdigit():
        raise ValueError(f"invalid pid in pid file {target}: {text!r}")
    return int(text)


def windows_service_target(command: str, platform: str = sys.platform) -> str:
    """On Windows ``-sl quit=<name>`` names a service (as nats-server's does), unless the
    target is a PID or an existing pid file; "" when the command is not for a service."""
    _, _, target = command.partition("=")
    target = target.strip()
    if platform != "win32" or not target or target.isdigit() or Path(target).is_file():
        return ""
    return target


def _signal_windows_service(command: str) -> int:
    try:
        from stanpkg_winsvc import winservice  # installed by the Chocolatey package
    except ImportError:
        print("the Windows service tools (stanpkg_winsvc) are not installed", file=sys.stderr)
        return 1
    try:
        winservice.send(command)
    except Exception as exc:  # pywin32 reports service manager errors as its own types
        print(f"unable to signal service: {exc}", file=sys.stderr)
        return 1
    return 0


def send_signal(command: str) -> int:
    """``-sl quit|stop|term|reopen|reload|ldm[=<pid, pid file or Windows service>]``;
    0 on success."""
    if windows_service_target(command):
        return _signal_windows_service(command)
    name, _, target = command.partition("=")
    sig = _SIGNALS.get(name.strip().lower())
    if sig is None:
        print(f'unknown signal "{name}"', file=sys.stderr)
        return 1
    try:
        if target:
            pid = _resolve_pid(target.strip())
        else:
            pids = _running_servers()
            if not pids:
                raise ValueError("no nats-streaming-server processes running")
            if len(pids) > 1:
                listed = "\n".join(str(p) for p in pids)
                raise ValueError(f"multiple nats-streaming-server processes running:\n{listed}")
            pid = pids[0]
        os.kill(pid, sig)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"unable to signal process {pid}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
