"""The plan's path checks on paths the server's user may not look at: a directory it cannot
enter (a root-owned 0700 volume, as a container's user meets it) is a configuration error
with the directory named, never a traceback. Run for real as a user that is not root
(``nobody`` when the tests run as root), on real directories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging.fixtures import ROOT

NOBODY = 65534
AS_ROOT = os.geteuid() == 0
if AS_ROOT:
    pytestmark = pytest.mark.skipif(shutil.which("setpriv") is None, reason="no setpriv")


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory the test user can enter (pytest's tmp_path is root's 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="stanpkg-paths-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for sub in path.rglob("*"):
            if sub.is_dir():
                sub.chmod(0o755)
        shutil.rmtree(path)


def _locked(path: Path) -> Path:
    """A directory the test user cannot enter: root's 0700 as root, else 000 (its own)."""
    path.mkdir()
    path.chmod(0o700 if AS_ROOT else 0o000)
    return path


def _uid() -> int:
    return NOBODY if AS_ROOT else os.getuid()


def _stanpkg(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # setpriv rather than subprocess's user=: the venv's interpreter may live under root's
    # 0700 home, which setpriv still execs (it drops its capabilities only at the exec).
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run(
        [*(as_nobody if AS_ROOT else []), sys.executable, "-m", "stanpkg.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "HOME": str(cwd)},
        timeout=120,
    )


def _errors(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode != 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def _unreachable(locked: Path) -> str:
    return f'cannot be reached: "{locked}" is not enterable by this user (uid {_uid()})'


def test_run_with_a_store_directory_in_a_locked_directory(base: Path) -> None:
    locked = _locked(base / "data")
    store = locked / "datastore"
    out = _errors(_stanpkg("run", "-st", "file", "--dir", str(store), "-p", "-1", cwd=base))
    assert f'dir: directory "{store}" {_unreachable(locked)}' in out, out


def test_validate_names_the_directory_it_cannot_enter(base: Path) -> None:
    locked = _locked(base / "data")
    store = locked / "deeper" / "datastore"
    out = _errors(_stanpkg("validate", "-st", "file", "--dir", str(store), cwd=base))
    assert f'dir: directory "{store}" {_unreachable(locked)}' in out, out


def test_cluster_log_path_in_a_locked_directory(base: Path) -> None:
    locked = _locked(base / "data")
    log = locked / "raft"
    flags = ["-st", "file", "--dir", str(base / "store"), "--cluster_log_path", str(log)]
    (base / "store").mkdir(mode=0o777)
    (base / "store").chmod(0o777)
    out = _errors(_stanpkg("validate", *flags, "-clustered", "-cluster_node_id", "a", cwd=base))
    assert f'log_path: directory "{log}" {_unreachable(locked)}' in out, out


def test_a_locked_directory_as_the_store_itself_is_not_writable(base: Path) -> None:
    locked = _locked(base / "data")
    out = _errors(_stanpkg("validate", "-st", "file", "--dir", str(locked), cwd=base))
    assert f'dir: directory "{locked}" is not writable' in out, out


def test_files_in_a_locked_directory(base: Path) -> None:
    locked = _locked(base / "secrets")
    cert, key = locked / "client.pem", locked / "client.key"
    script = locked / "archive.sh"
    out = _errors(
        _stanpkg(
            "validate",
            "-tls_client_cert",
            str(cert),
            "-tls_client_key",
            str(key),
            "-st",
            "file",
            "--dir",
            str(base),
            "--file_slice_archive_script",
            str(script),
            cwd=base,
        )
    )
    for name, path in (("client_cert", cert), ("client_key", key)):
        assert f'{name}: file "{path}" {_unreachable(locked)}' in out, out
    assert f'slice_archive_script: file "{script}" {_unreachable(locked)}' in out, out


@pytest.mark.skipif(not AS_ROOT, reason="needs a file of another user")
def test_a_file_of_another_user_is_not_readable(base: Path) -> None:
    cert = base / "client.pem"
    cert.write_text("")
    cert.chmod(0o600)  # root's
    key = base / "client.key"
    key.write_text("")
    key.chmod(0o644)
    args = ["validate", "-tls_client_cert", str(cert), "-tls_client_key", str(key)]
    out = _errors(_stanpkg(*args, cwd=base))
    assert f'client_cert: file "{cert}" is not readable' in out, out
    assert "client_key" not in out, out
