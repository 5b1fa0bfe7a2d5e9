"""``python -m stanpkg_winsvc install|remove|signal|binpath ...`` (used by the Chocolatey
scripts). Parsing and every decision are in ``logic``; Windows calls in ``winservice``."""

from __future__ import annotations

import argparse
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
    return parser


def spec_from(ns: argparse.Namespace) -> logic.ServiceSpec:
    name = logic.service_name(ns.service_name, ns.syslog_name)
    return logic.ServiceSpec(name, ns.python, ns.venv, ns.config, ns.syslog_name, tuple(ns.extra))


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        if ns.command == "binpath":
            print(logic.binpath(spec_from(ns)))
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
