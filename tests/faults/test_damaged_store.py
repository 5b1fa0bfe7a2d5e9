"""FILE stores written by a real stanpkg server, then damaged as a copy, a crash or an
operator can damage them, and started again: nothing acknowledged is destroyed or
hidden, and a refused start leaves the store directory as it found it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.file.lock import LOCK_FILE
from tests.faults.processes import StanProcess
from tests.server.conftest import ROOT, new_cluster_id
from tests.server.stan_client import StanClient
from tests.server.test_process import RUNNER

CHANNEL = "ch"
ENTRY = 32  # bytes per index entry


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root`` (and root itself): size and modification time."""
    if not root.exists():
        return {}
    found = {".": (0, root.stat().st_mtime_ns)}
    for path in root.rglob("*"):
        info = path.stat()
        found[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return found


async def _publish(url: str, cluster_id: str, first: int, count: int) -> None:
    client = await StanClient.connect(url, cluster_id, f"pub{first}")
    try:
        for i in range(first, first + count):
            await client.publish(CHANNEL, f"m{i}".encode(), timeout=5)  # acknowledged
    finally:
        await client.close()


async def _read_all(url: str, cluster_id: str) -> list[tuple[int, bytes]]:
    client = await StanClient.connect(url, cluster_id, "reader")
    try:
        sub = await client.subscribe(CHANNEL, start=pb.First, max_inflight=4096)
        got = await sub.collect_until_quiet(1.0)
        return [(m.sequence, m.data) for m in got]
    finally:
        await client.close()


def _server(nats_url: str, store: Path, tmp_path: Path, cluster_id: str) -> StanProcess:
    args = ["-ns", nats_url, "-st", "FILE", "--dir", str(store), "--file_slice_max_msgs", "10"]
    return StanProcess(cluster_id, args, tmp_path)


def _refused(args: list[str], cluster_id: str) -> str:
    """Start a server that must refuse to start: its output (exit status 1)."""
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, "-cid", cluster_id, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout + done.stderr


async def _written_store(nats_url: str, tmp_path: Path, count: int) -> tuple[Path, str]:
    store, cluster_id = tmp_path / "store", new_cluster_id()
    stan = _server(nats_url, store, tmp_path, cluster_id)
    await asyncio.to_thread(stan.start)
    try:
        await _publish(nats_url, cluster_id, 1, count)
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
    return store, cluster_id


@pytest.mark.timeout(90)
async def test_an_index_that_lost_entries_is_rebuilt_from_the_data(
    nats_url: str, tmp_path: Path
) -> None:
    """The reference (v0.23.2) trusts such an index: it serves 1,995 of 2,000 messages
    and leaves the 5 unindexed records on disk; stanpkg used to cut them off the data
    file as "a write interrupted before it was acknowledged". A record that passes its
    CRC is never destroyed: it is indexed again and served."""
    store, cluster_id = await _written_store(nats_url, tmp_path, 25)
    newest, older = store / CHANNEL / "msgs.3.idx", store / CHANNEL / "msgs.1.idx"
    dat_sizes = {p.name: p.stat().st_size for p in (store / CHANNEL).glob("*.dat")}
    for idx, lost in ((newest, 3), (older, 4)):  # the newest slice and an older one
        with open(idx, "r+b") as f:
            f.truncate(os.path.getsize(idx) - lost * ENTRY)
    stan = _server(nats_url, store, tmp_path, cluster_id)
    await asyncio.to_thread(stan.start)
    try:
        got = await _read_all(nats_url, cluster_id)
        assert got == [(i, f"m{i}".encode()) for i in range(1, 26)]
        await _publish(nats_url, cluster_id, 26, 2)  # the channel goes on after them
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
    assert "Recovering them from data file" in stan.output()
    for name in ("msgs.1.dat", "msgs.2.dat"):  # nothing cut off
        assert (store / CHANNEL / name).stat().st_size == dat_sizes[name]
    assert older.stat().st_size == 4 + 10 * ENTRY  # written again, whole
    again = _server(nats_url, store, tmp_path, cluster_id)
    await asyncio.to_thread(again.start)
    try:
        got = await _read_all(nats_url, cluster_id)
        assert got == [(i, f"m{i}".encode()) for i in range(1, 28)]
        assert await asyncio.to_thread(again.stop) == 0
    finally:
        await asyncio.to_thread(again.kill9)


@pytest.mark.timeout(90)
async def test_a_vanished_data_file_stops_the_start_and_changes_nothing(
    nats_url: str, tmp_path: Path
) -> None:
    """The reference (v0.23.2) starts with the older slices and gives the missing
    messages' sequences to new ones, whose index entries land behind the stale ones:
    after the next restart it serves 1..1,500 of 2,020. stanpkg refuses the start naming
    the missing file, so nothing is given out twice and the file can be put back; a
    refused start leaves the store directory exactly as it was (no .rootdir.lck made)."""
    store, cluster_id = await _written_store(nats_url, tmp_path, 25)
    (store / CHANNEL / "msgs.3.dat").unlink()
    (store / LOCK_FILE).unlink()  # as a copy of the store would come
    before = _tree(store)
    args = ["-ns", nats_url, "-st", "FILE", "--dir", str(store), "--file_slice_max_msgs", "10"]
    out = await asyncio.to_thread(_refused, args, cluster_id)
    missing = store / CHANNEL / "msgs.3.dat"
    assert f'data file "{missing}" is missing; its index lists 5 message(s), sequences 21..25' in (
        out
    )
    assert "[FTL] STREAM: Failed to start: " in out
    assert _tree(store) == before

    # What docs/operations.md tells the operator without a backup: move the index aside.
    (store / CHANNEL / "msgs.3.idx").rename(tmp_path / "msgs.3.idx.lost")
    stan = _server(nats_url, store, tmp_path, cluster_id)
    await asyncio.to_thread(stan.start)
    try:
        await _publish(nats_url, cluster_id, 100, 7)  # acknowledged after the damage
        assert await asyncio.to_thread(stan.stop) == 0
    finally:
        await asyncio.to_thread(stan.kill9)
    again = _server(nats_url, store, tmp_path, cluster_id)
    await asyncio.to_thread(again.start)
    try:
        got = await _read_all(nats_url, cluster_id)
        assert [data for _, data in got] == [
            *(f"m{i}".encode() for i in range(1, 21)),
            *(f"m{i}".encode() for i in range(100, 107)),
        ]
        assert await asyncio.to_thread(again.stop) == 0
    finally:
        await asyncio.to_thread(again.kill9)


@pytest.mark.timeout(60)
async def test_a_busy_port_leaves_the_store_directory_alone(tmp_path: Path) -> None:
    """A start refused because the embedded nats-server's port is taken creates nothing:
    neither the store directory, nor its lock file, nor the truncate_bad_eof witness."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        fresh = tmp_path / "fresh"
        args = ["-a", "127.0.0.1", "-p", str(port), "-st", "FILE", "--dir", str(fresh)]
        out = await asyncio.to_thread(_refused, args, new_cluster_id())
        assert "address already in use" in out
        assert not fresh.exists()
        existing = tmp_path / "existing"
        existing.mkdir()
        (existing / "keep").write_text("x")
        before = _tree(existing)
        args[-1] = str(existing)
        await asyncio.to_thread(_refused, args, new_cluster_id())
        assert _tree(existing) == before
        # Nor the witness of the one-start repair option: the next start may still use it.
        await asyncio.to_thread(_refused, [*args, "--file_truncate_bad_eof"], new_cluster_id())
        assert _tree(existing) == before
