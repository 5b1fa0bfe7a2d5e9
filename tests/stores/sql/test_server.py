"""``stanpkg run -st sql`` with STAN clients: restarts recover everything, a SIGKILL
loses no acknowledged message, start-up failures are one ``[FTL]`` line."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.log import Logger
from stanpkg.stores.factory import create_store
from stanpkg.stores.sql.schema import script_path
from tests.ports import free_port
from tests.server.conftest import LogCapture, running
from tests.server.stan_client import StanClient, StanError
from tests.server.test_node_client import run_scenario
from tests.stores.sql.conftest import Databases, Target

STANPKG = Path(sys.executable).parent / "stanpkg"
READY = "Streaming Server is ready"


class Server:
    """A ``stanpkg run`` process on its own ports."""

    def __init__(self, target: Target, *args: str) -> None:
        self.target = target
        self.args = args
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.proc: asyncio.subprocess.Process | None = None
        self.output: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def run(self) -> int:
        """Run until it exits (start-up failures); returns the exit status."""
        await self._spawn()
        assert self.proc is not None and self._reader is not None
        code = await asyncio.wait_for(self.proc.wait(), 20)
        await self._reader
        return code

    async def start(self, ready: str = READY) -> None:
        await self._spawn()
        await self.wait_for(ready)

    async def wait_for(self, text: str, timeout: float = 15) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if any(text in line for line in self.output):
                return
            assert self.proc is not None
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"{text!r} not logged:\n" + self.text())

    async def _spawn(self) -> None:
        t = self.target
        self.output = []
        self.proc = await asyncio.create_subprocess_exec(
            str(STANPKG),
            "run",
            "-p",
            str(self.port),
            "-st",
            "sql",
            "--sql_driver",
            t.driver,
            "--sql_source",
            t.source,
            *self.args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            self.output.append(line.decode(errors="replace").rstrip())

    def text(self) -> str:
        return "\n".join(self.output)

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
            await asyncio.wait_for(self.proc.wait(), 20)
        if self._reader is not None:
            await self._reader


@contextlib.asynccontextmanager
async def serving(target: Target, *args: str) -> contextlib.AsyncExitStack:  # type: ignore[misc]
    server = Server(target, *args)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.mark.slow
async def test_restart_recovers_messages_durables_and_pending(target: Target) -> None:
    async with serving(target) as server:
        client = await StanClient.connect(server.url, "test-cluster", "me")
        sub = await client.subscribe("orders", durable="dur", manual_acks=True, max_inflight=100)
        for i in range(1, 51):
            await client.publish("orders", f"o{i}".encode())
        received = await sub.collect(50)
        assert [m.sequence for m in received] == list(range(1, 51))
        for m in received[:20]:
            await sub.ack(m)
        await client.ping()  # the acks are in before the close
        await client.close()  # the durable goes offline with 21..50 pending
    async with serving(target) as server:
        assert "Recovered 1 channel(s)" in server.text()
        assert "Message store is SQL" in server.text()
        client = await StanClient.connect(server.url, "test-cluster", "me")
        sub = await client.subscribe("orders", durable="dur", manual_acks=True, max_inflight=100)
        again = await sub.collect(30)
        assert [(m.sequence, m.redelivered) for m in again] == [(s, True) for s in range(21, 51)]
        for m in again:
            await sub.ack(m)
        await client.publish("orders", b"o51")
        latest = await sub.next()
        assert (latest.sequence, latest.data, latest.redelivered) == (51, b"o51", False)
        everything = await client.subscribe("orders", start=pb.First)
        assert [m.data for m in await everything.collect(51)] == [
            f"o{i}".encode() for i in range(1, 52)
        ]
        await client.close()


@pytest.mark.slow
@pytest.mark.parametrize("caching", [True, False], ids=["caching", "no_caching"])
async def test_sigkill_loses_no_acknowledged_message(target: Target, caching: bool) -> None:
    args = () if caching else ("--sql_no_caching",)
    acked: list[int] = []
    async with serving(target, *args) as server:
        client = await StanClient.connect(server.url, "test-cluster", "pub")
        waiters: dict[int, asyncio.Future[pb.PubAck]] = {}
        for i in range(100_000):
            waiters[i] = await client.publish_async("crash", f"p{i}".encode())
            for n, waiter in list(waiters.items()):
                if waiter.done():
                    del waiters[n]
                    if not waiter.cancelled() and not waiter.result().error:
                        acked.append(n)
            if len(acked) >= 300:
                break
            if i % 50 == 49:
                await asyncio.sleep(0.001)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGKILL)  # publishes still in flight
        await server.stop()
        with contextlib.suppress(Exception):
            await client.nc.close()
    assert len(acked) >= 300
    async with serving(target, *args) as server:
        client = await StanClient.connect(server.url, "test-cluster", "reader")
        await client.publish("crash", b"marker")
        sub = await client.subscribe("crash", start=pb.First, max_inflight=10_000)
        stored: list[pb.MsgProto] = []
        while not stored or stored[-1].data != b"marker":
            stored.append(await sub.next(5))
        await client.close()
    seqs = [m.sequence for m in stored]
    assert seqs == list(range(1, len(seqs) + 1))  # in order, no duplicate, no hole
    indexes = [int(m.data[1:]) for m in stored[:-1]]
    assert indexes == sorted(set(indexes))  # publish order kept
    assert set(acked) <= set(indexes)  # every acknowledged message is there


async def test_in_process_server_with_the_node_client(
    target: Target, nats_url: str, node_modules: Path
) -> None:
    plan = target.plan(cluster_id="sql-node")
    log = Logger(stream=LogCapture(), debug=False, trace=False)
    async with running(plan, nats_url, store=create_store(plan, log)):
        result = await run_scenario("durable", nats_url, plan.cluster_id)
    resumed = [(m["seq"], m["redelivered"]) for m in result["resumed"]]
    assert resumed == [(3, True), (4, True), (5, False)]
    assert result["afterUnsub"] == 0


async def test_a_failed_write_answers_publishers_with_the_error(
    target: Target, nats_url: str
) -> None:
    plan = target.plan(cluster_id=f"sql-fail-{target.driver}")
    capture = LogCapture()
    store = create_store(plan, Logger(stream=capture, debug=False, trace=False))
    async with running(plan, nats_url, store=store) as (_, server_log):
        client = await StanClient.connect(nats_url, plan.cluster_id, "pub")
        await client.publish("t", b"one")
        target.execute_all(["ALTER TABLE Messages RENAME TO MessagesGone"])
        with pytest.raises(StanError, match=r"^sql: "):
            await client.publish("t", b"lost")
        target.execute_all(["ALTER TABLE MessagesGone RENAME TO Messages"])
        await client.publish("t", b"two")
        everything = await client.subscribe("t", start=pb.First)
        assert [m.data for m in await everything.collect(2)] == [b"one", b"two"]
        await everything.assert_nothing()
        await client.close()
    assert "Unable to store messages in channel 't': sql: " in server_log.getvalue()
    assert "Error writing to the SQL store: sql: " in capture.getvalue()


async def test_fault_tolerant_standby_takes_over_the_database(
    server_target: Target, nats_url: str
) -> None:
    cluster_id = f"sql-ft-{server_target.driver}"
    args = ("-ns", nats_url, "-cid", cluster_id, "--ft_group", "ft")
    active, standby = Server(server_target, *args), Server(server_target, *args)
    try:
        await active.start()
        await standby.start("Starting in standby mode")
        client = await StanClient.connect(nats_url, cluster_id, "ft-pub")
        for i in range(5):
            await client.publish("ft", f"m{i}".encode())
        await client.close()
        await active.stop(signal.SIGKILL)  # the StoreLock row stays: it must go stale
        await standby.wait_for(READY, timeout=30)
        assert "Server is active" in standby.text()
        client = await StanClient.connect(nats_url, cluster_id, "ft-reader")
        sub = await client.subscribe("ft", start=pb.First)
        assert [m.data for m in await sub.collect(5)] == [f"m{i}".encode() for i in range(5)]
        await client.close()
    finally:
        await active.stop(signal.SIGKILL)
        await standby.stop()
    assert "[FTL]" not in standby.text()


async def test_cluster_id_mismatch_is_fatal(tmp_path: Path) -> None:
    target = Target("sqlite", str(tmp_path / "store.db"))  # the check is the server's
    async with serving(target, "-cid", "first"):
        pass
    server = Server(target, "-cid", "second")
    assert await server.run() == 1
    assert (
        '[FTL] STREAM: Failed to start: cluster ID "second" does not match recovered value '
        'of "first"' in server.text()
    )


def _assert_fatal(server: Server, text: str) -> None:
    output = server.text()
    assert "Traceback" not in output
    fatal = [line for line in output.splitlines() if "[FTL]" in line]
    assert len(fatal) == 1, output
    assert "[FTL] STREAM: Failed to start: " in fatal[0]
    assert text in fatal[0], output


@pytest.mark.parametrize(
    ("driver", "source", "text"),
    [
        ("postgres", "host=127.0.0.1 port=1 user=u dbname=d", "Connection refused"),
        ("mysql", "u:p@tcp(127.0.0.1:1)/d", "Error 2003: Can't connect to MySQL server"),
    ],
)
async def test_unreachable_database_is_fatal(driver: str, source: str, text: str) -> None:
    server = Server(Target(driver, source))
    assert await server.run() == 1
    _assert_fatal(server, text)


@pytest.mark.parametrize("driver", ["postgres", "mysql"])
async def test_missing_tables_are_fatal(driver: str, databases: Databases) -> None:
    databases.source(driver)  # skips when the database server is unavailable
    source = databases.create(driver, databases.dsns[driver], tables=False)
    server = Server(Target(driver, source))
    assert await server.run() == 1
    _assert_fatal(server, f"create the tables with {script_path(driver)}")


async def test_unsupported_schema_version_is_fatal(tmp_path: Path) -> None:
    target = Target("sqlite", str(tmp_path / "store.db"))  # drivers: see test_errors
    target.open().close()
    target.execute("INSERT INTO ServerInfo (id, proto, version) VALUES ('x', ?, 7)", (b"",))
    server = Server(target)
    assert await server.run() == 1
    _assert_fatal(server, "sql: unsupported version: 7 (supports [1..1])")
