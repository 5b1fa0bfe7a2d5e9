"""The pywin32 layer: registers, controls and hosts the service. Every decision comes from
``logic``; this module only calls Windows. Not importable off Windows."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import servicemanager  # type: ignore[import-not-found]
import win32api  # type: ignore[import-not-found]
import win32con  # type: ignore[import-not-found]
import win32event  # type: ignore[import-not-found]
import win32evtlogutil  # type: ignore[import-not-found]
import win32service  # type: ignore[import-not-found]
import win32serviceutil  # type: ignore[import-not-found]

from stanpkg_winsvc import logic


def run_sc(calls: list[list[str]]) -> None:
    for argv in calls:
        subprocess.run(argv, check=True)


def install(spec: logic.ServiceSpec) -> None:
    run_sc(logic.sc_create(spec))
    # The account exists once the service does: lock the install down for it, then
    # remember the names for the next upgrade and the uninstall.
    run_sc(logic.icacls_lockdown(spec))
    settings = logic.Settings(spec.name, spec.syslog_name, spec.config)
    with open(logic.state_path(spec.install_root), "w", encoding="utf-8") as file:
        file.write(logic.settings_json(settings))
    # The event source the server logs to (--syslog_name), in the Application log.
    win32evtlogutil.AddSourceToRegistry(spec.syslog_name or spec.name, msgDLL=None)


def remove(name: str) -> None:
    send(f"quit={name}", wait=True)
    run_sc([logic.sc_delete(name)])


def send(arg: str, wait: bool = False) -> None:
    command, name = logic.parse_signal(arg)
    code = logic.control_code(command)
    try:
        win32serviceutil.ControlService(name, code)
    except win32service.error as exc:  # not running: nothing to stop
        if code != logic.SERVICE_CONTROL_STOP:
            raise
        print(f"{name}: {exc.strerror}", file=sys.stderr)
        return
    if wait:
        win32serviceutil.WaitForServiceStatus(name, win32service.SERVICE_STOPPED, 60)


class StanService(win32serviceutil.ServiceFramework):  # type: ignore[misc]
    _svc_name_ = logic.DEFAULT_SERVICE
    _svc_display_name_ = logic.DISPLAY_NAME
    host: logic.HostArgs

    def __init__(self, args: list[str]) -> None:
        super().__init__(args)
        self.stop_event = win32event.CreateEvent(None, 0, 0, None)
        self.stopping = False
        self.child: subprocess.Popen[bytes] | None = None

    def GetAcceptedControls(self) -> int:
        return super().GetAcceptedControls() | win32service.SERVICE_ACCEPT_PARAMCHANGE

    def SvcOtherEx(self, control: int, event_type: int, data: object) -> None:
        self._handle(control)

    def SvcStop(self) -> None:
        self.ReportServiceStatus(win32service.SERVICE_STOP_PENDING)
        self._handle(logic.SERVICE_CONTROL_STOP)

    def SvcShutdown(self) -> None:
        self._handle(logic.SERVICE_CONTROL_SHUTDOWN)

    def _handle(self, code: int) -> None:
        action = logic.on_control(code)
        if action.kind == "stop":
            self.stopping = True
            threading.Thread(target=self._stop_child, args=(action.grace,), daemon=True).start()
        elif action.kind == "signal" and self.child is not None:
            cmd = logic.forward_command(self._child_cmd(), action.command, self.child.pid)
            subprocess.run(cmd, check=False)

    def _child_cmd(self) -> list[str]:
        spec = logic.ServiceSpec(self.host.service_name, sys.executable, self.host.venv, "")
        return logic.child_command(spec)[:3] + list(self.host.server_args)

    def _stop_child(self, grace: float) -> None:
        broke_at: float | None = None
        while self.child is not None:
            now = time.monotonic()
            step = logic.stop_step(self.child.poll() is None, broke_at, now, grace)
            if step == "done":
                break
            if step == "break":
                self.child.send_signal(win32con.CTRL_BREAK_EVENT)
                broke_at = now
            elif step == "kill":
                self.child.kill()
            time.sleep(0.2)
        win32event.SetEvent(self.stop_event)

    def SvcDoRun(self) -> None:
        # A hidden console that the child shares: CTRL_BREAK needs one.
        win32api.AllocConsole()
        self.child = subprocess.Popen(
            self._child_cmd(), creationflags=subprocess.CREATE_NEW_PROCESS_GROUP
        )
        code = self.child.wait()
        failed, status = logic.exit_status(code, self.stopping)
        if failed:
            servicemanager.LogErrorMsg(f"{self.host.service_name}: server exited with {code}")
            # A non-zero service exit code makes the SCM run the recovery (restart) actions.
            self.ReportServiceStatus(win32service.SERVICE_STOPPED, win32ExitCode=status)
            return
        win32event.WaitForSingleObject(self.stop_event, win32event.INFINITE)


def host_main(argv: list[str]) -> int:
    StanService.host = logic.parse_host_args(argv)
    StanService._svc_name_ = StanService.host.service_name
    servicemanager.Initialize()
    servicemanager.PrepareToHostSingle(StanService)
    servicemanager.StartServiceCtrlDispatcher()
    return 0
