"""``stanpkg migrate`` tests: the Go-written fixtures (read-only copies) and stores written
with stanpkg's writers, migrated by the real command into a real JetStream or a real
stanpkg cluster (tests/cluster's helpers)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

from tests.cluster.conftest import (  # noqa: F401 - fixtures and the async-test hook
    STANPKG,
    cluster,
    jetstream_url,
    pytest_pyfunc_call,
)
from tests.pipeline.helpers import FixtureCopy, copy_fixture

EXIT_DIFFERENT = 3


def read_only_fixture(name: str, dest: Path) -> FixtureCopy:
    """A copy of a Go-written fixture that nobody may write to (files and directories
    without write permission), with its production config pointing at it."""
    copy = copy_fixture(name, dest)
    for root, dirs, files in os.walk(copy.datastore):
        for entry in dirs + files:
            path = os.path.join(root, entry)
            os.chmod(path, os.stat(path).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    copy.datastore.chmod(copy.datastore.stat().st_mode & ~stat.S_IWUSR)
    return copy


def file_hashes(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> SHA-256): the manifest's ``files``."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def manifest_hashes(copy: FixtureCopy) -> dict[str, str]:
    return {entry["path"]: entry["sha256"] for entry in copy.manifest["files"]}


def run_migrate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STANPKG, "migrate", "--progress-every", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def migrate_json(*args: str) -> dict[str, Any]:
    """A migration that must succeed; its JSON summary."""
    done = run_migrate("--format", "json", *args)
    assert done.returncode == 0, done.stderr + done.stdout
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary
