"""Loading the shared conformance cases (../shared/conformance) as test data."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(
    os.environ.get("STANPKG_CONFORMANCE_DIR", ROOT.parent / "shared" / "conformance")
)

# Cases the reference accepts but stanpkg rejects on purpose (conformance README, "does
# better"): negative per-channel limits, channel names with spaces, bad values of options
# the store does not use, ft_group with clustering.
STANPKG_REJECTS = {
    "chan_negative_is_unlimited": "negative per-channel limits",
    "chan_space_in_name": "channel name with a space",
    "file_options_ignored_with_memory": "bad file options with the MEMORY store",
    "cluster_with_ft_group": "ft_group together with clustering",
}
# Cases the reference fails only at run time (the configuration itself is fine).
RUNTIME_ONLY = {
    "opts_nats_server_url_refused": "external NATS server refuses the connection",
    "opts_secure": "secure connection to a NATS server without TLS",
}
# Cases whose reference failure is a command-line usage error: exit status 2 for stanpkg.
USAGE_ERRORS = {"cli_bool_flag_positional", "cli_duration_flag_bare_number", "cli_mb_float"}


@dataclass(frozen=True)
class Case:
    name: str
    conf: Path
    args: tuple[str, ...]
    env: dict[str, str]
    status: str  # "running" or "exit N"
    error_lines: tuple[str, ...]
    log_lines: tuple[str, ...]

    @property
    def reference_runs(self) -> bool:
        return self.status == "running"

    @property
    def stanpkg_accepts(self) -> bool:
        if self.name in STANPKG_REJECTS:
            return False
        return self.reference_runs or self.name in RUNTIME_ONLY

    def argv(self, port: int = 4222, http_port: int = 8222) -> list[str]:
        text = self.conf.read_text(encoding="utf-8", errors="replace")
        argv = ["-a", "127.0.0.1", "-p", str(port)]
        if re.search(r"^\s*(http_port|monitor_port|http)\b", text, re.M | re.I):
            argv += ["-m", str(http_port)]
        if not any("{conf}" in a for a in self.args):
            argv += ["-sc", str(self.conf)]
        return argv + [
            a.replace("{conf}", str(self.conf)).replace("{dir}", str(CONFORMANCE))
            for a in self.args
        ]

    def limits_block(self) -> list[str]:
        """The recorded store-limits block, without the ``STREAM: `` prefix."""
        block: list[str] = []
        for line in self.log_lines:
            text = line.removeprefix("STREAM: ")
            if text.startswith("---------- Store Limits"):
                block = [text]
                continue
            if block:
                block.append(text)
                if text and set(text) == {"-"}:
                    return block
        return []

    def log_text(self, prefix: str) -> list[str]:
        return [
            ln.removeprefix("STREAM: ")[len(prefix) :]
            for ln in self.log_lines
            if ln.removeprefix("STREAM: ").startswith(prefix)
        ]


def _parse_expected(path: Path) -> tuple[str, list[str], list[str]]:
    status, errors, log = "", [], []
    section = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("status: "):
            status = line.removeprefix("status: ")
        elif line in ("== error", "== log"):
            section = line
        elif section == "== error":
            errors.append(line)
        elif section == "== log":
            log.append(line)
    return status, errors, log


def load_cases() -> list[Case]:
    cases = []
    for conf in sorted(CONFORMANCE.glob("*.conf")):
        name = conf.stem
        args: list[str] = []
        args_file = conf.with_suffix(".args")
        if args_file.exists():
            for line in args_file.read_text(encoding="utf-8").splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    args += shlex.split(line)
        env: dict[str, str] = {}
        env_file = conf.with_suffix(".env")
        if env_file.exists():
            for line in env_file.read_text(encoding="utf-8").splitlines():
                if "=" in line:
                    key, _, value = line.partition("=")
                    env[key] = value
        status, errors, log = _parse_expected(conf.with_suffix(".expected"))
        cases.append(Case(name, conf, tuple(args), env, status, tuple(errors), tuple(log)))
    return cases
