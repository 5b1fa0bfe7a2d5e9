"""The product's identity: ``--version`` and the banner's product line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from stanpkg import __version__
from stanpkg.server.identity import hot_path_line, identity_line, nats_server_version
from stanpkg.transport.embedded import find_nats_server_binary

BIN = Path(sys.executable).parent


def _installed_nats_version() -> str:
    out = subprocess.run(
        [find_nats_server_binary(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return out.strip().rsplit(" ", 1)[-1].lstrip("v")  # "nats-server: v2.15.1"


def test_version_names_stanpkg_the_stan_release_and_nats_server() -> None:
    expected = [
        f"stanpkg {__version__}",
        "nats-streaming-server 0.25.6 (STAN protocol and behaviour implemented)",
        f"nats-server {_installed_nats_version()} ({find_nats_server_binary()})",
        hot_path_line(),
    ]
    for argv in (
        ["stanpkg", "--version"],
        ["stanpkg", "version"],
        ["nats-streaming-server", "--version"],
    ):
        out = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, check=True
        ).stdout
        assert out.splitlines() == expected, argv


def test_banner_product_line() -> None:
    nats = _installed_nats_version()
    assert identity_line(embedded=True) == (
        f"stanpkg version {__version__}, STAN protocol of nats-streaming-server 0.25.6, "
        f"nats-server {nats} (embedded)"
    )
    assert identity_line(embedded=False).endswith(", nats-server external")


def test_nats_server_version_of_a_missing_binary_is_unknown(tmp_path: Path) -> None:
    assert nats_server_version(str(tmp_path / "absent")) == ""
    not_nats = tmp_path / "not-nats"
    not_nats.write_text("#!/bin/sh\necho hello\n")
    not_nats.chmod(0o755)
    assert nats_server_version(str(not_nats)) == ""


def test_version_says_the_hot_path_is_pure_python_in_a_source_checkout() -> None:
    # The editable install runs the sources; tests/packaging/test_compiled.py checks the
    # compiled build's line.
    assert hot_path_line().startswith("hot path: pure Python (")
