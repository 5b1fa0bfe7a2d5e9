"""kill -9 of a stanpkg server at seeded random moments, round after round, on one store.

    .venv/bin/python -m tests.faults.kill9 [--rounds 50] [--seed 15] [--store FILE|SQL|POSTGRES]

(tests/faults/test_kill9.py runs a few rounds; the command runs as many as asked.) SQL runs
on SQLite unless ``--sql-source`` names a PostgreSQL DSN (with ``--sql-driver postgres``);
``--store POSTGRES`` runs on a private PostgreSQL cluster made for the run
(tests/faults/postgres.py: root and the PostgreSQL server binaries needed). The command's
exit status is 1 when anything acknowledged was lost or a durable position moved.

Each round restarts the server on the same store, then:

- *settle*: a durable subscriber (manual acks) resumes; everything it gets is acked until
  the channel is quiet. What a restart redelivers is checked here: a message whose ack
  was sent before the previous round can only come back if that ack was lost, and the
  previous round's settle would then have redelivered it already (resume redelivers
  pending messages at once), so it must not come back now;
- *chaos*: a publisher publishes with acks (a window of 8 in flight) while the durable
  subscriber acks most messages, leaves some unacked, and now and then closes its STAN
  connection and reconnects; the server is killed with -9 after a random delay.

After the last round a clean restart checks the rest: the channel holds 1..N without a
gap, every acknowledged publish is in it, and every message reached the durable (acked
at least once), so no position moved past an unacked message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats
from nats.aio.client import Client as Nats

from stanpkg.proto import protocol_pb2 as pb
from tests.faults.processes import StanProcess
from tests.faults.workload import CHANNEL, Publisher, gaps, read_channel
from tests.server.stan_client import StanClient, StanSub

DURABLE = "dur"
QUIET = 0.4  # seconds without a delivery: the subscriber has everything available


@dataclass
class Kill9Report:
    rounds: int = 0
    acked_publishes: int = 0
    unconfirmed_publishes: int = 0  # sent, no PubAck before the kill: may or may not be stored
    stored: int = 0
    redelivered_after_restart: int = 0  # acked in the killed round, ack lost with it
    reconnects: int = 0
    cut_by_kill: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class _State:
    publisher: Publisher = field(default_factory=Publisher)
    last_ack_round: dict[int, int] = field(default_factory=dict)  # seq -> round of last ack


async def _connect(url: str, cluster_id: str, client_id: str) -> StanClient:
    # After a kill the old connection of this client ID is gone: the server replaces it.
    return await StanClient.connect(url, cluster_id, client_id)


async def _durable(client: StanClient) -> StanSub:
    return await client.subscribe(
        CHANNEL, durable=DURABLE, manual_acks=True, max_inflight=20, ack_wait=1, start=pb.First
    )


async def _settle(sub: StanSub, state: _State, rnd: int, report: Kill9Report) -> None:
    while True:
        try:
            msg = await sub.next(timeout=QUIET)
        except TimeoutError:
            return
        last = state.last_ack_round.get(msg.sequence)
        if last is not None:
            if last < rnd - 1:
                report.problems.append(
                    f"round {rnd}: seq {msg.sequence} delivered again, acked in round {last}"
                )
            report.redelivered_after_restart += 1
        state.last_ack_round[msg.sequence] = rnd
        await sub.ack(msg)


async def _consume(
    url: str,
    cluster_id: str,
    holder: list[StanClient],
    opened: list[Nats],
    sub: StanSub,
    state: _State,
    rnd: int,
    rng: random.Random,
    report: Kill9Report,
) -> None:
    while True:
        with contextlib.suppress(TimeoutError):
            msg = await sub.next(timeout=0.2)
            if rng.random() < 0.85:
                state.last_ack_round[msg.sequence] = rnd
                await sub.ack(msg)
        if rng.random() < 0.03:  # close and come back: the durable keeps its position
            await holder[0].close()
            # Noted before the connect: one cut by the kill after the server registered it
            # must still be closed, or the next round's connect finds that client alive
            # (it answers the server's probe) and is refused as a duplicate.
            opened.append(nc := await nats.connect(url, name="test-consumer"))
            holder[0] = await StanClient.connect(url, cluster_id, "consumer", nc=nc)
            sub = await _durable(holder[0])
            report.reconnects += 1


async def _chaos(
    server: StanProcess, url: str, state: _State, rnd: int, rng: random.Random, report: Kill9Report
) -> None:
    publisher = await _connect(url, server.cluster_id, "publisher")
    holder = [await _connect(url, server.cluster_id, "consumer")]
    opened = [publisher.nc, holder[0].nc]
    sub = await _durable(holder[0])
    await _settle(sub, state, rnd, report)
    consume = _consume(url, server.cluster_id, holder, opened, sub, state, rnd, rng, report)
    tasks = [
        asyncio.create_task(state.publisher.run(publisher)),
        asyncio.create_task(consume),
    ]
    await asyncio.sleep(rng.uniform(0.05, 1.2))
    await asyncio.to_thread(server.kill9)
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a request cut by the kill is expected, nothing else
            report.cut_by_kill.append(repr(exc))
    for nc in opened:
        with contextlib.suppress(Exception):
            await nc.close()


async def _final_check(server: StanProcess, url: str, state: _State, report: Kill9Report) -> None:
    rnd = report.rounds + 1
    consumer = await _connect(url, server.cluster_id, "consumer")
    await _settle(await _durable(consumer), state, rnd, report)
    reader = await _connect(url, server.cluster_id, "reader")
    seqs, ids = await read_channel(reader)
    report.stored = len(seqs)
    if gaps(seqs):
        report.problems.append(f"{len(seqs)} messages, missing {gaps(seqs)[:10]}")
    lost = sorted(state.publisher.acked_ids - ids)
    if lost:
        report.problems.append(f"{len(lost)} acknowledged publishes lost: {lost[:10]}")
    never_acked = sorted(set(seqs) - set(state.last_ack_round))
    if never_acked:
        report.problems.append(f"durable skipped {len(never_acked)}: {never_acked[:10]}")
    report.acked_publishes = len(state.publisher.acked_ids)
    report.unconfirmed_publishes = state.publisher.unconfirmed
    await reader.close()
    await consumer.close()


async def run_kill9(
    url: str, store_args: list[str], tmp: Path, *, rounds: int, seed: int
) -> Kill9Report:
    rng = random.Random(seed)
    report = Kill9Report()
    state = _State()
    cluster_id = f"kill9-{seed}-{rng.randrange(10**6)}"
    server = StanProcess(cluster_id, ["-ns", url, *store_args], tmp)
    try:
        for rnd in range(1, rounds + 1):
            await asyncio.to_thread(server.start)
            await _chaos(server, url, state, rnd, rng, report)
            report.rounds = rnd
        await asyncio.to_thread(server.start)
        await _final_check(server, url, state, report)
        assert await asyncio.to_thread(server.stop) == 0, server.output()
    finally:
        await asyncio.to_thread(server.kill9)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--store", choices=("FILE", "SQL", "POSTGRES"), default="FILE")
    parser.add_argument("--sql-driver", default="sqlite")
    parser.add_argument("--sql-source", default="")
    opts = parser.parse_args()
    from tests.faults.postgres import PrivatePostgres
    from tests.server.conftest import start_nats_process

    with tempfile.TemporaryDirectory(prefix="kill9-") as tmp_name:
        tmp = Path(tmp_name)
        nats_proc, url = start_nats_process(tmp / "nats")
        postgres = None
        if opts.store == "FILE":
            args = ["-st", "FILE", "--dir", str(tmp / "store")]
        elif opts.store == "POSTGRES":
            postgres = PrivatePostgres()
            postgres.create()
            args = ["-st", "SQL", "--sql_driver", "postgres", "--sql_source", postgres.dsn]
        else:
            source = opts.sql_source or str(tmp / "store.db")
            args = ["-st", "SQL", "--sql_driver", opts.sql_driver, "--sql_source", source]
        started = time.monotonic()
        try:
            report = asyncio.run(run_kill9(url, args, tmp, rounds=opts.rounds, seed=opts.seed))
        finally:
            if postgres is not None:
                postgres.destroy()
            nats_proc.kill()
            nats_proc.wait(10)
    print(
        f"store {opts.store}, {report.rounds} kills, seed {opts.seed}, "
        f"{time.monotonic() - started:.0f} s"
    )
    print(
        f"  acknowledged publishes: {report.acked_publishes}, all found: "
        f"{not any('lost' in p for p in report.problems)}"
    )
    print(f"  unconfirmed at a kill (may or may not be stored): {report.unconfirmed_publishes}")
    print(f"  stored: {report.stored}")
    print(f"  durable reconnects: {report.reconnects}")
    print(
        f"  redelivered after a restart (acked just before the kill): "
        f"{report.redelivered_after_restart}"
    )
    print(f"  requests cut by a kill: {report.cut_by_kill[:5]}")
    print(f"  problems: {len(report.problems)}")
    for problem in report.problems[:20]:
        print(f"    {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
