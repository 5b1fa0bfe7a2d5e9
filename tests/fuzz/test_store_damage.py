"""A bounded, seeded run of tests/fuzz/store_damage.py (truncations and bit flips of
every FILE store file kind, of a stanpkg-written store and of the Go fixtures), and the
same damage seen through a real ``stanpkg run``: ready, or status 1 with an error naming
the file and the offset; never a traceback."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from tests.fuzz import store_damage as damage
from tests.stores.file.helpers import start_server

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("server.dat", "clients.dat", "subs.dat", "msgs.N.dat", "msgs.N.idx")


@pytest.mark.slow
def test_damaged_stores_fixed_seed(tmp_path: Path) -> None:
    report = damage.run(300, 15, tmp_path)
    print("\n".join(report.lines()))
    assert report.failures == []
    assert report.cases == 300
    outcomes = report.outcomes
    for kind in KINDS:
        for how in ("cut", "flip"):
            assert any(key.startswith(f"{kind} {how}: ") for key in outcomes), (kind, how)
    # The repair paths were taken, not only the refusals.
    assert outcomes["msgs.N.dat cut: recovered with -file_truncate_bad_eof"] > 0
    assert outcomes["subs.dat cut: recovered with -file_truncate_bad_eof"] > 0
    assert outcomes["clients.dat cut: recovered with -file_truncate_bad_eof"] > 0
    assert outcomes["server.dat: recovered once cut to its header"] > 0


def _flip_in_first_record(root: Path, name: str) -> Path:
    path = root / name
    data = bytearray(path.read_bytes())
    data[4 + 8 + 2] ^= 0x10  # the payload of the first record
    path.write_bytes(bytes(data))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["server.dat", "clients.dat", "ch/subs.dat"])
def test_damaged_store_through_the_server_process(tmp_path: Path, name: str) -> None:
    """A bit flip in a record's payload: the real server refuses to start, naming the
    file and the offset, as the reference does (a CRC mismatch is never repaired)."""
    root = tmp_path / "store"
    damage.write_store(root)
    path = _flip_in_first_record(root, name)
    server = start_server(["-st", "file", "--dir", str(root), "-cid", "damage"], tmp_path / "log")
    try:
        log = server.log()
        assert server.proc.returncode == 1, log
    finally:
        server.stop()
    assert "Traceback" not in log
    (fatal,) = [line for line in log.splitlines() if "[FTL] STREAM: Failed to start: " in line]
    assert str(path) in fatal and re.search(r"offset \d+", fatal), fatal


@pytest.mark.slow
def test_damaged_message_is_reported_when_read(tmp_path: Path) -> None:
    """A message record other than a slice's last is checked when it is read (as the
    reference's): the server starts, and reading it logs the message, file and offset."""
    root = tmp_path / "store"
    damage.write_store(root)
    path = _flip_in_first_record(root, "ch/msgs.1.dat")
    server = start_server(["-st", "file", "--dir", str(root), "-cid", "damage"], tmp_path / "log")
    try:
        assert server.proc.poll() is None, server.log()
        expected = "Error looking up message ch:1 (corrupted data, expected crc to be"
        deadline = time.monotonic() + 10  # recovery reads the durable's pending messages
        while expected not in server.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = server.log()
    finally:
        server.stop()
    (line,) = [line for line in log.splitlines() if expected in line]
    assert f'(file "{path}", offset 4))' in line
    assert "Traceback" not in log


def test_idx_cut_at_an_entry_boundary_loses_nothing(tmp_path: Path) -> None:
    """Entries cut off an index: the records they described are whole and pass their CRC,
    so they are indexed again from the data file (the reference hides them)."""
    root = tmp_path / "store"
    damage.write_store(root)
    original = damage.recovered_messages(root)
    idx = root / "ch" / "msgs.1.idx"
    idx.write_bytes(idx.read_bytes()[: 4 + 2 * 32])
    assert damage.recovered_messages(root) == original
    shutil.rmtree(root)
