"""SIGKILL while clients publish (FILE store, sync_on_flush on): after a restart every
message whose PubAck was received is there, in publish order, sequences unique."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.file.format import open_datastore
from tests.server.stan_client import StanClient
from tests.stores.file.helpers import running_server, start_server
from tests.stores.file.test_format import check_slice

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PUBLISHERS = 3
WINDOW = 64  # outstanding publishes per publisher
RUN_BEFORE_KILL = 2.5  # seconds
# The reader stops after this long without a message: generous, so a loaded machine's
# pause is not mistaken for the end of the channel (which would look like a loss).
READ_IDLE = 5.0


async def publisher(url: str, index: int, acked: list[int], stop: asyncio.Event) -> None:
    client = await StanClient.connect(url, "crash", f"pub-{index}")
    inflight: set[asyncio.Future[pb.PubAck]] = set()
    counter = 0

    def done(number: int, fut: asyncio.Future[pb.PubAck]) -> None:
        if not fut.cancelled() and fut.exception() is None and not fut.result().error:
            acked.append(number)

    with contextlib.suppress(Exception):
        while not stop.is_set():
            while len(inflight) >= WINDOW:
                finished, _ = await asyncio.wait(inflight, timeout=0.5)
                inflight -= finished
                if stop.is_set():
                    return
            counter += 1
            fut = await client.publish_async("crash.chan", f"{index}:{counter}".encode())
            fut.add_done_callback(lambda f, n=counter: done(n, f))
            inflight.add(fut)


async def drive(url: str, server_kill: object) -> list[list[int]]:
    acked: list[list[int]] = [[] for _ in range(PUBLISHERS)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(publisher(url, i, acked[i], stop)) for i in range(PUBLISHERS)]
    await asyncio.sleep(RUN_BEFORE_KILL)
    server_kill()  # type: ignore[operator]
    await asyncio.sleep(0.3)  # acks already on the wire are not counted: nothing arrives
    stop.set()
    snapshot = [list(a) for a in acked]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return snapshot


async def read_all(url: str) -> list[pb.MsgProto]:
    """Everything stored (acknowledged or not): until nothing comes for a while."""
    client = await StanClient.connect(url, "crash", "reader")
    sub = await client.subscribe("crash.chan", start=pb.StartPosition.First, max_inflight=8192)
    got: list[pb.MsgProto] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            got.append(await sub.next(READ_IDLE))
        except TimeoutError:
            break
    await client.close()
    return got


def test_sigkill_while_publishing(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    args = ["-st", "file", "--dir", str(directory), "-cid", "crash", "--file_slice_max_msgs", "700"]
    server = start_server(args, tmp_path / "first.log")
    assert server.proc.poll() is None, server.log()
    acked = asyncio.run(drive(server.url, lambda: server.proc.send_signal(signal.SIGKILL)))
    server.proc.wait(10)
    total_acked = sum(map(len, acked))
    assert total_acked > 500, "the publishers should have got well going before the kill"

    with running_server(args, tmp_path / "second.log") as restarted:
        msgs = asyncio.run(read_all(restarted.url))
        log = restarted.log()
    assert "Traceback" not in log
    seqs = [m.sequence for m in msgs]
    assert seqs == list(range(1, len(seqs) + 1))  # unique, in order, no gap
    stored: list[list[int]] = [[] for _ in range(PUBLISHERS)]
    for m in msgs:
        index, number = map(int, m.data.decode().split(":"))
        stored[index].append(number)
    for index in range(PUBLISHERS):
        assert stored[index] == sorted(stored[index]), "publish order kept"
        assert len(set(stored[index])) == len(stored[index]), "no duplicates"
        missing = set(acked[index]) - set(stored[index])
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
    ds = open_datastore(directory)
    assert [m.sequence for m in ds.iter_messages("crash.chan")] == seqs
    for dat in sorted((directory / "crash.chan").glob("msgs.*.dat")):
        check_slice(dat, dat.with_suffix(".idx"))
