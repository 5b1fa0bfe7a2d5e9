"""What this program is: stanpkg's own version, the Go server release whose protocol and
behaviour it implements, and the nats-server it runs (for the banner and ``--version``)."""

from __future__ import annotations

import re
import subprocess

from stanpkg import __version__
from stanpkg.hot_path import MODULES, compiled_modules
from stanpkg.transport.embedded import find_nats_server_binary
from stanpkg.transport.errors import NatsError

__all__ = [
    "STAN_VERSION",
    "hot_path_line",
    "identity_line",
    "nats_server_version",
    "version_text",
]

STAN_VERSION = "0.25.6"  # the nats-streaming-server release whose behaviour is implemented

_VERSION = re.compile(r"v?(\d+\.\d+\.\d+\S*)")


def nats_server_version(binary: str = "") -> str:
    """The version ``nats-server --version`` reports (``2.15.1``), "" when there is no
    binary or it does not answer: the banner must not stop a start over it."""
    try:
        binary = binary or find_nats_server_binary()
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (NatsError, OSError, subprocess.SubprocessError):
        return ""
    match = _VERSION.search(out)
    return match.group(1) if match else ""


def identity_line(embedded: bool, nats_version: str = "") -> str:
    """The banner's product line: ours, the implemented STAN release, the NATS server
    (``nats_version``: the embedded one's, as its banner gave it; else asked of it)."""
    if embedded:
        version = nats_version or nats_server_version()
        nats = f"nats-server {version or 'version unknown'} (embedded)"
    else:
        nats = "nats-server external"
    stan = f"STAN protocol of nats-streaming-server {STAN_VERSION}"
    return f"stanpkg version {__version__}, {stan}, {nats}"


def version_text() -> str:
    """``--version``: one line per component, the NATS server's binary path included."""
    try:
        binary = find_nats_server_binary()
    except NatsError as exc:
        nats = f"nats-server not found ({exc})"
    else:
        nats = f"nats-server {nats_server_version(binary) or 'version unknown'} ({binary})"
    return (
        f"stanpkg {__version__}\n"
        f"nats-streaming-server {STAN_VERSION} (STAN protocol and behaviour implemented)\n"
        f"{nats}\n"
        f"{hot_path_line()}"
    )


def hot_path_line() -> str:
    """Whether this installation runs the compiled per-message modules (hot_path.py)."""
    compiled = compiled_modules()
    if len(compiled) == len(MODULES):
        return "hot path: compiled (mypyc)"
    if compiled:
        return f"hot path: partly compiled ({', '.join(compiled)})"
    # An editable install, STANPKG_COMPILE=0, or a machine without a C compiler and the
    # Python headers at install time (docs/install.md).
    return "hot path: pure Python (no C compiler at install, or STANPKG_COMPILE=0: docs/install.md)"
