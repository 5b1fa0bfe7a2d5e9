"""A private PostgreSQL cluster for one test: its own data directory and port, so that
stopping and starting it (the fault under test) disturbs nobody else's database.

Needs the PostgreSQL server binaries (scripts/start-databases.sh installs them) and
root (the server runs as the ``postgres`` user, which owns the data directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.server.conftest import ROOT
from tests.transport.conftest import free_port

USER = "stanpkg"
SCHEMA = ROOT / "stanpkg" / "stores" / "sql" / "scripts" / "postgres.db.sql"


def _bin_dir() -> Path | None:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return versions[-1].parent if versions else None


def unavailable() -> str:
    """Why a private cluster cannot run here ("" when it can)."""
    if _bin_dir() is None:
        return "PostgreSQL server binaries are not installed"
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return "a private PostgreSQL cluster needs root (it runs as user postgres)"
    return ""


class PrivatePostgres:
    def __init__(self) -> None:
        bin_dir = _bin_dir()
        assert bin_dir is not None
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="stanpkg-faults-pg-"))
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.port = free_port()
        self.dsn = f"host=127.0.0.1 port={self.port} user={USER} dbname=postgres sslmode=disable"

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            check=True,
            capture_output=True,
            cwd=self.dir,
            timeout=60,
        )

    def create(self) -> None:
        self._as_postgres(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "-N"
        )
        self.start()
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(SCHEMA), self.dsn],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
            "-c shared_buffers=16MB -c fsync=off"
        )
        self._as_postgres(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.dir / "pg.log"), "-w", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``immediate`` is a crash: no checkpoint, clients cut off."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "stop")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
