"""``python -m stanpkg_winsvc install|remove|signal|binpath ...`` (used by the Chocolatey
scripts). Parsing and every decision are in ``logic``; Windows calls in ``winservice``."""

from __future__ import annotations

import argparse
import json
import sys

from stanpkg_winsvc import logic


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stanpkg_winsvc")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("install", "binpath"):
        p = sub.add_parser(name)
        p.add_argument("--service-name", default="")
        p.add_argument("--syslog-name", default="")
        p.add_argument("--python", required=True, help="base interpreter (not the venv's)")
        p.add_argument("--venv", required=True)
        p.add_argument("--config", required=True)
        p.add_argument("extra", nargs="*", help="extra server flags (after --)")
    p = sub.add_parser("remove")
    p.add_argument("--service-name", default=logic.DEFAULT_SERVICE)
    p = sub.add_parser("signal", help="like nats-streaming-server -sl CMD=SERVICE")
    p.add_argument("signal")
    # What the Chocolatey scripts ask before acting (no Windows calls). Give the package
    # parameters as --name=VALUE: Windows PowerShell drops empty native arguments.
    for name in ("plan-install", "plan-uninstall"):
        p = sub.add_parser(name)
        p.add_argument("--state", required=True, help="the remembered settings (JSON)")
        p.add_argument("--service-name", default="")
        p.add_argument("--syslog-name", default="")
        if name == "plan-install":
            p.add_argument("--config", default="")
            p.add_argument("--default-config", required=True)
    return parser


def _params(ns: argparse.Namespace) -> dict[str, str]:
    return {
        "ServiceName": ns.service_name,
        "SyslogName": ns.syslog_name,
        "Config": getattr(ns, "config", ""),
    }


def _remembered(path: str) -> logic.Settings | None:
    try:
        with open(path, encoding="utf-8") as file:
            return logic.parse_settings(file.read())
    except OSError:
        return None


def plan(ns: argparse.Namespace) -> str:
    """plan-install: the install's settings as JSON (with ``replaces``, an old service to
    remove); plan-uninstall: the services to remove, one per line."""
    remembered = _remembered(ns.state)
    if ns.command == "plan-uninstall":
        return "\n".join(logic.services_to_remove(_params(ns), remembered))
    decided = logic.plan_install(_params(ns), remembered, ns.default_config)
    return json.dumps({**vars(decided.settings), "replaces": decided.replaces})


def spec_from(ns: argparse.Namespace) -> logic.ServiceSpec:
    name = logic.service_name(ns.service_name, ns.syslog_name)
    return logic.ServiceSpec(name, ns.python, ns.venv, ns.config, ns.syslog_name, tuple(ns.extra))


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        if ns.command == "binpath":
            print(logic.binpath(spec_from(ns)))
            return 0
        if ns.command.startswith("plan-"):
            print(plan(ns))
            return 0
        from stanpkg_winsvc import winservice  # Windows only from here on

        if ns.command == "install":
            winservice.install(spec_from(ns))
        elif ns.command == "remove":
            winservice.remove(ns.service_name)
        else:
            winservice.send(ns.signal)
    except logic.UsageError as exc:
        print(f"stanpkg_winsvc: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
