"""NATS server options given a value of the wrong type: stanpkg beside nats-server.

    .venv/bin/python tests/fuzz/nats_types.py [--keys port,tls] [--show-all]

For every top-level key nats-server reads (``NATS_SERVER_KEYS`` below, from the
``processConfigFileLine`` switch of nats-server's ``server/opts.go``) and every wrong value
in ``WRONG_VALUES``, it writes a NATS configuration holding that one entry, runs
``nats-server -t -c`` on it and ``stanpkg validate -sc empty.conf -c nats.conf``
in-process, and prints the cases where they disagree: accepted by stanpkg but rejected by
nats-server ("ACCEPTED"), rejected without a ``file:line:col`` ("NO POSITION"), or rejected
by stanpkg and accepted by nats-server ("STRICTER"). Exit status 1 when any case accepted
what nats-server rejects or lacks a position.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stanpkg.cli import cmd_validate
from stanpkg.transport.embedded import find_nats_server_binary

# nats-server 2.15's top-level keys, aliases included.
NATS_SERVER_KEYS = [  # in the order of its switch
    "listen",
    "client_advertise",
    "port",
    "server_name",
    "host",
    "net",
    "debug",
    "trace",
    "trace_verbose",
    "trace_headers",
    "logtime",
    "logtime_utc",
    "mappings",
    "maps",
    "disable_sublist_cache",
    "no_sublist_cache",
    "accounts",
    "default_sentinel",
    "authorization",
    "http",
    "https",
    "http_port",
    "monitor_port",
    "https_port",
    "http_base_path",
    "cluster",
    "gateway",
    "leaf",
    "leafnodes",
    "store_dir",
    "storedir",
    "jetstream",
    "logfile",
    "log_file",
    "logfile_size_limit",
    "log_size_limit",
    "logfile_max_num",
    "log_max_num",
    "syslog",
    "remote_syslog",
    "pidfile",
    "pid_file",
    "ports_file_dir",
    "prof_port",
    "prof_block_rate",
    "max_control_line",
    "max_payload",
    "max_pending",
    "proxy_protocol",
    "max_connections",
    "max_conn",
    "max_traced_msg_len",
    "max_subscriptions",
    "max_subs",
    "max_sub_tokens",
    "max_subscription_tokens",
    "ping_interval",
    "ping_max",
    "tls",
    "ocsp",
    "allow_non_tls",
    "write_deadline",
    "write_timeout",
    "lame_duck_duration",
    "lame_duck_grace_period",
    "operator",
    "operators",
    "roots",
    "root",
    "root_operators",
    "root_operator",
    "resolver",
    "account_resolver",
    "accounts_resolver",
    "resolver_tls",
    "resolver_preload",
    "resolver_pinned_accounts",
    "no_auth_user",
    "system_account",
    "system",
    "no_system_account",
    "no_system",
    "no_sys_acc",
    "no_header_support",
    "trusted",
    "trusted_keys",
    "connect_error_reports",
    "reconnect_error_reports",
    "websocket",
    "ws",
    "mqtt",
    "server_tags",
    "server_metadata",
    "feature_flags",
    "default_js_domain",
    "ocsp_cache",
    "no_fast_producer_stall",
    "max_closed_clients",
    "proxies",
]

# One value of each type of the language. Arrays hold strings: nats-server's lexer
# refuses a number as the last item of an array before a line end.
WRONG_VALUES = {
    "string": '"wrong"',
    "integer": "7",
    "float": "1.5",
    "boolean": "true",
    "map": "{ wrong: 1 }",
    "array": '["wrong"]',
    "date": "2016-05-04T18:53:41Z",
}

_POSITIONED = re.compile(r"^nats\.conf:(\d+):(\d+): error: ")


@dataclass(frozen=True)
class Outcome:
    key: str
    value_type: str
    nats_server: str  # "" = accepted, else its first complaint
    stanpkg: str  # "" = accepted, else the first error line
    positioned: bool

    @property
    def verdict(self) -> str:
        if self.nats_server and not self.stanpkg:
            return "ACCEPTED"
        if self.nats_server and not self.positioned:
            return "NO POSITION"
        if self.stanpkg and not self.nats_server:
            return "STRICTER"
        return "same"


def nats_server_says(binary: str, path: Path) -> str:
    run = subprocess.run(
        [binary, "-t", "-c", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    if run.returncode == 0:
        return ""
    lines = [line for line in (run.stderr + run.stdout).splitlines() if line.strip()]
    return lines[0] if lines else f"exit {run.returncode}"


def stanpkg_says(work: Path) -> tuple[str, bool]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = cmd_validate(["-sc", str(work / "empty.conf"), "-c", str(work / "nats.conf")])
    errors = [line for line in err.getvalue().splitlines() if ": error: " in line]
    if status == 0:
        return "", False
    first = errors[0] if errors else err.getvalue().strip()
    shown = first.replace(f"{work}/", "")
    return shown, all(_POSITIONED.match(line.replace(f"{work}/", "")) for line in errors)


def probe(keys: list[str]) -> list[Outcome]:
    binary = find_nats_server_binary()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="nats-types-") as tmp:
        work = Path(tmp)
        (work / "empty.conf").write_text("", encoding="utf-8")
        for key in keys:
            for value_type, value in WRONG_VALUES.items():
                (work / "nats.conf").write_text(f"{key}: {value}\n", encoding="utf-8")
                reference = nats_server_says(binary, work / "nats.conf")
                ours, positioned = stanpkg_says(work)
                outcomes.append(Outcome(key, value_type, reference, ours, positioned))
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", help="comma-separated keys (default: every nats-server key)")
    parser.add_argument("--show-all", action="store_true", help="print agreeing cases too")
    args = parser.parse_args()
    keys = args.keys.split(",") if args.keys else list(NATS_SERVER_KEYS)
    outcomes = probe(keys)
    for o in outcomes:
        if o.verdict != "same" or args.show_all:
            print(f"{o.verdict:11} {o.key}: {o.value_type}")
            print(f"    nats-server: {o.nats_server or 'accepted'}")
            print(f"    stanpkg:     {o.stanpkg or 'accepted'}")
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.verdict] = counts.get(o.verdict, 0) + 1
    print(", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())))
    return 1 if counts.get("ACCEPTED") or counts.get("NO POSITION") else 0


if __name__ == "__main__":
    sys.exit(main())
