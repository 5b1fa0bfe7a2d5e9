"""The archive script, invoked the way the server invokes slice_archive_script."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stanpkg.pipeline import archive
from stanpkg.pipeline.cli import archive_slice_main
from stanpkg.pipeline.options import ReadOptions
from stanpkg.pipeline.planning import plan_read
from tests.pipeline.helpers import DiscardedSlice, discard_first_slice, run_script, write_store


def test_script_moves_the_slice_into_the_archive(tmp_path: Path) -> None:
    root = write_store(tmp_path / "datastore", {"orders.new": 10}, slice_max_msgs=4)
    original = (root / "orders.new" / "msgs.1.dat").read_bytes()
    dat_bak, idx_bak = discard_first_slice(root, "orders.new")
    proc = run_script("orders.new", dat_bak, idx_bak)
    assert proc.returncode == 0, proc.stderr
    assert "archived msgs.1.dat.bak of orders.new" in proc.stdout
    archived = tmp_path / "datastore.archive" / "orders.new"
    assert (archived / "msgs.1.dat").read_bytes() == original
    assert (archived / "msgs.1.idx").exists()
    assert not dat_bak.exists() and not idx_bak.exists()
    assert sorted(p.name for p in archived.iterdir()) == ["msgs.1.dat", "msgs.1.idx"]
    options = ReadOptions.parse({"path": str(root), "includeArchived": "true"}, environ={})
    tasks = plan_read(options).tasks
    assert [(t.slice.number, t.origin) for t in tasks] == [
        (1, "archived"),
        (2, "live"),
        (3, "live"),
    ]


def test_archive_dir_from_environment_and_relative_paths(
    tmp_path: Path, discarded_slice: DiscardedSlice
) -> None:
    dat_bak = discarded_slice.dat
    proc = subprocess.run(
        [sys.executable, "-m", "stanpkg.pipeline.archive", "c", "ds/c/msgs.1.dat.bak",
         "ds/c/msgs.1.idx.bak"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "STANPKG_ARCHIVE_DIR": str(tmp_path / "elsewhere")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "elsewhere" / "c" / "msgs.1.dat").exists()
    assert not dat_bak.exists()


def test_rerun_after_interruption_finishes_the_move(discarded_slice: DiscardedSlice) -> None:
    _, dat_bak, idx_bak, target = discarded_slice
    target.mkdir(parents=True)
    # Interrupted after the data file was linked into the archive, before the unlink.
    os.link(idx_bak, target / "msgs.1.idx")
    os.link(dat_bak, target / "msgs.1.dat")
    assert archive_slice_main(["c", str(dat_bak), str(idx_bak)]) == 0
    assert not dat_bak.exists() and not idx_bak.exists()
    assert (target / "msgs.1.dat").stat().st_nlink == 1
    # And once more: nothing left to do is still success (idempotent).
    assert archive_slice_main(["c", str(dat_bak), str(idx_bak)]) == 0


def test_interrupted_copy_never_loses_the_slice(
    discarded_slice: DiscardedSlice, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Archive on another filesystem (no hard links): a crash in the copy leaves the
    source intact and no half file under a slice name; the next run completes."""
    _, dat_bak, idx_bak, target = discarded_slice
    content = dat_bak.read_bytes()

    def cross_device(src: str, dst: str) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    real_replace = os.replace

    def crash(src: str, dst: str) -> None:
        raise KeyboardInterrupt  # killed between the copy and the rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        archive.archive_slice("c", str(dat_bak), str(idx_bak))
    assert dat_bak.read_bytes() == content and idx_bak.exists()
    assert not (target / "msgs.1.idx").exists() and not list(target.glob(".*tmp"))
    monkeypatch.setattr(os, "replace", real_replace)
    archive.archive_slice("c", str(dat_bak), str(idx_bak))
    assert (target / "msgs.1.dat").read_bytes() == content
    assert not dat_bak.exists()


def test_conflicting_archive_keeps_the_source(discarded_slice: DiscardedSlice) -> None:
    _, dat_bak, idx_bak, target = discarded_slice
    target.mkdir(parents=True)
    (target / "msgs.1.idx").write_bytes(b"something else")
    proc = run_script("c", dat_bak, idx_bak)
    assert proc.returncode == 1
    assert "already exists with other content" in proc.stderr
    assert dat_bak.exists() and idx_bak.exists()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["c", "x"],
        ["c", "/tmp/msgs.1.dat", "/tmp/msgs.1.idx"],
        ["a/b", "/d/msgs.1.dat.bak", "i"],
    ],
)
def test_bad_invocations(args: list[str], tmp_path: Path) -> None:
    assert archive.main(args) in (1, 2)


def test_missing_files_fail(tmp_path: Path) -> None:
    missing = tmp_path / "ds" / "c" / "msgs.4.dat.bak"
    assert archive.main(["c", str(missing), str(missing) + "x"]) == 1


@pytest.mark.slow
def test_server_drops_slices_through_the_archive_script(tmp_path: Path) -> None:
    """A FILE store server with slice_archive_script = the archive command drops slices by
    max_msgs while a client publishes; the archive then holds every dropped message."""
    import asyncio

    from tests.server.stan_client import StanClient
    from tests.stores.file.helpers import running_server

    script = tmp_path / "archive-slice"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -m stanpkg.pipeline.archive "$@"\n')
    script.chmod(0o755)
    root = tmp_path / "datastore"
    args = ["-cid", "arch", "-st", "file", "--dir", str(root), "-mm", "8",
            "--file_slice_max_msgs", "4", "--file_slice_archive_script", str(script)]  # fmt: skip

    async def publish(url: str) -> None:
        client = await StanClient.connect(url, "arch", "pub")
        for i in range(1, 31):
            await client.publish("orders.new", f"m{i}".encode())
        await client.close()

    with running_server(args, tmp_path / "server.log") as server:
        asyncio.run(publish(server.url))
        archived = tmp_path / "datastore.archive" / "orders.new"
        for _ in range(100):  # the server runs the script in the background
            if len(list(archived.glob("msgs.*.dat"))) >= 5:
                break
            time.sleep(0.1)
    assert "Error invoking archive script" not in server.log()
    assert not list((root / "orders.new").glob("*.bak"))
    options = ReadOptions.parse({"path": str(root), "includeArchived": "true"}, environ={})
    tasks = plan_read(options).tasks
    origins = {t.origin for t in tasks}
    assert origins == {"archived", "live"}
    covered = sorted(seq for t in tasks for seq in range(t.slice.first_seq, t.slice.last_seq + 1))
    assert covered == list(range(1, 31))
