"""ENOSPC on the FILE store while clients publish, on a 2 MiB tmpfs the test mounts:
publishers get error PubAcks, nothing acknowledged before is damaged, publishing
resumes once space is freed, and a restart recovers every acknowledged message."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.factory import create_store
from tests.server.conftest import LogCapture, make_plan, running, start_nats_process
from tests.server.stan_client import StanClient, StanError, StanSub

PAYLOAD = 4096


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (ENOSPC test)")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    proc, url = start_nats_process(tmp_path / "nats")
    yield url
    proc.kill()
    proc.wait(10)


def _payload(i: int) -> bytes:
    return f"message {i} ".encode().ljust(PAYLOAD, b".")


async def _fill(client: StanClient, first: int) -> tuple[list[int], list[str]]:
    """Publish until the disk is full and three more; (acknowledged, errors)."""
    acked: list[int] = []
    errors: list[str] = []
    i = first
    while len(errors) < 4 and i < first + 2000:
        try:
            await client.publish("ch", _payload(i))
            acked.append(i)
        except StanError as exc:
            errors.append(str(exc))
        i += 1
    return acked, errors


async def _ack_all(sub: StanSub) -> None:
    while True:
        with contextlib.suppress(TimeoutError):
            await sub.ack(await sub.next(timeout=1))


def test_disk_full_while_publishing(small_disk: Path, nats_url: str, tmp_path: Path) -> None:
    root = small_disk / "store"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * 400_000)  # what the operator frees later
    plan = make_plan("-st", "file", "--dir", str(root))

    async def publish_phase() -> tuple[list[int], list[str], list[int]]:
        log = LogCapture()
        from stanpkg.server.log import Logger

        store = create_store(plan, Logger(stream=log, debug=False, trace=False))
        async with running(plan, nats_url, store=store) as (_, server_log):
            client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
            # A durable that receives and acknowledges as it goes: its subs.dat
            # records meet the full disk too.
            sub = await client.subscribe("ch", durable="d", manual_acks=True)
            reader = asyncio.create_task(_ack_all(sub))
            acked, errors = await _fill(client, 0)
            filler.unlink()
            resumed: list[int] = []
            for i in range(10_000, 10_020):
                await client.publish("ch", _payload(i))
                resumed.append(i)
            reader.cancel()
            await client.close()
            print(server_log.getvalue()[-2000:])
            assert "Traceback" not in server_log.getvalue()
            # one "Unable to store messages in channel 'ch'" per failure, not two in a row
            assert "'ch': unable to store" not in server_log.getvalue()
            assert "Unable to store messages in channel 'ch': " in server_log.getvalue()
        return acked, errors, resumed

    acked, errors, resumed = asyncio.run(publish_phase())
    print(len(acked), errors[:2])
    assert acked and len(errors) == 4
    assert all("No space left on device" in e for e in errors), errors

    async def read_back() -> list[bytes]:
        from stanpkg.server.log import Logger

        log = LogCapture()
        store = create_store(plan, Logger(stream=log, debug=False, trace=False))
        async with running(plan, nats_url, store=store):
            client = await StanClient.connect(nats_url, plan.cluster_id, "reader")
            sub = await client.subscribe("ch", start=pb.First)
            got = await sub.collect(len(acked) + len(resumed), timeout=20)
            await client.close()
        return [m.data for m in got]

    data = asyncio.run(read_back())
    assert data == [_payload(i) for i in acked + resumed]
