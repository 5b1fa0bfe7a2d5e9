"""make-venv, the script the deb's postinst and the rpm's %post run, on this machine's
python3 (a supported 3.11): it makes the venv from the bundled wheels offline, swaps a new
one in on a second run, and an extra it cannot fetch is a warning, not a failed install."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.packaging.fixtures import ROOT, build_dir

pytestmark = pytest.mark.slow


def _make_venv(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "STANPKG_WHEELS": str(build_dir() / "wheelhouse-linux"),
        "STANPKG_PREFIX": str(tmp_path / "opt"),
        "STANPKG_EXTRAS_FILE": str(tmp_path / "extras"),
        "PIP_NO_INDEX": "1",  # no package index reachable, as in the test containers
        "HOME": str(tmp_path),
    }
    return subprocess.run(
        ["sh", str(ROOT / "packaging" / "make-venv.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_make_venv_offline_then_again_with_an_unreachable_extra(
    python_dist: Path, tmp_path: Path
) -> None:
    assert (build_dir() / "wheelhouse-linux" / "PYTHON_VERSIONS").exists()
    prefix = tmp_path / "opt"
    first = _make_venv(tmp_path)
    assert first.returncode == 0, first.stderr
    stanpkg = prefix / "bin" / "stanpkg"
    # Built beside and moved in: every path inside names the final place.
    assert stanpkg.read_text().splitlines()[0] == f"#!{prefix}/bin/python"
    assert f"{prefix}.new" not in (prefix / "pyvenv.cfg").read_text()
    # Run as an operator would: not with this test run's PYTHONPATH (a checkout's source).
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    version = subprocess.run([stanpkg, "--version"], capture_output=True, text=True, env=clean)
    assert version.returncode == 0 and "stanpkg" in version.stdout, version.stderr
    # This machine's python3 is the 3.11 the compiled wheel was built for: pip takes it.
    assert version.stdout.splitlines()[-1] == "hot path: compiled (mypyc)", version.stdout
    # The drivers are bundled; pip itself is not left in the venv.
    site = next((prefix / "lib").glob("python3.*/site-packages"))
    assert (site / "psycopg").is_dir() and (site / "pymysql").is_dir()
    assert (site / "isal").is_dir()  # the crc extra: the FILE store's fast CRC-32
    assert not (site / "pip").exists()
    inode = os.stat(prefix).st_ino

    # Again, asking for Spark without an index: the venv is remade without it, with a
    # warning, and the extra is not remembered (the install does not fail).
    second = _make_venv(tmp_path, "--extra", "spark")
    assert second.returncode == 0, second.stderr
    assert "could not install the spark extra" in second.stderr, second.stderr
    assert not (tmp_path / "extras").exists()
    assert os.stat(prefix).st_ino != inode  # a new tree, swapped in
    assert not Path(f"{prefix}.new").exists() and not Path(f"{prefix}.old").exists()
    assert subprocess.run([stanpkg, "--version"], capture_output=True, env=clean).returncode == 0
