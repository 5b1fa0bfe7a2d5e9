"""``stanpkg migrate`` from an SQL store written by a real ``stanpkg run -st sql`` (SQLite,
PostgreSQL, MariaDB) into a real JetStream: sequences, timestamps and payloads as the
clients received them, the durables (plain and queue) with their pending sets, the clients;
the database exactly as before (row counts and a checksum of every table). A garbage row
is named by table and row, or skipped and listed with --permissive."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.jetstream.layout import kv_key_parts
from stanpkg.stores.sql.schema import TABLES
from tests.migrate.conftest import migrate_json, run_migrate
from tests.migrate.test_jetstream import jetstream, stream_messages
from tests.server.stan_client import StanClient
from tests.stores.sql.conftest import (  # noqa: F401 - fixtures
    Databases,
    Target,
    _target,
    database_dsns,
    databases,
)
from tests.stores.sql.test_server import serving

CLUSTER = "test-cluster"
GARBAGE = b"\xff\xfe garbage \x00\x07"


@pytest.fixture(params=("sqlite", "postgres", "mysql"))
def sql_target(request: pytest.FixtureRequest, databases: Databases, tmp_path: Path) -> Target:  # noqa: F811
    return _target(str(request.param), databases, tmp_path)


def config_of(target: Target, tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "source.conf"
    path.write_text(
        "streaming: {\n"
        f'  id: "{CLUSTER}"\n'
        '  store: "sql"\n'
        f'  sql_options: {{ driver: "{target.driver}", source: "{target.source}" }}\n'
        + "".join(f"  {line}\n" for line in lines)
        + "}\n"
    )
    return str(path)


def table_digests(target: Target) -> dict[str, tuple[int, str]]:
    """Table -> (rows, SHA-256 of the rows in a fixed order)."""
    found = {}
    for table, columns in TABLES.items():
        rows = target.query(f"SELECT {', '.join(columns)} FROM {table}")
        text = sorted(
            repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)) for row in rows
        )
        found[table] = (len(rows), hashlib.sha256("\n".join(text).encode()).hexdigest())
    return found


def file_digests(path: str) -> dict[str, str]:
    """The SQLite file and any -wal/-shm beside it: none may appear or change."""
    return {
        found.name: hashlib.sha256(found.read_bytes()).hexdigest()
        for found in sorted(Path(path).parent.glob(Path(path).name + "*"))
    }


async def write_store(target: Target, *server_args: str) -> dict[str, list[pb.MsgProto]]:
    """Two channels; a durable with 5..10 pending, a queue durable with 3..5 pending,
    both clients still connected when the server stops. The messages as delivered."""
    async with serving(target, *server_args) as server:
        me = await StanClient.connect(server.url, CLUSTER, "me")
        worker = await StanClient.connect(server.url, CLUSTER, "worker")
        for i in range(1, 11):
            await me.publish("orders", f"order-{i}".encode())
        for i in range(1, 6):
            await me.publish("audit", f"audit-{i}".encode() * i)
        durable = await me.subscribe(
            "orders", durable="dur", manual_acks=True, start=pb.First, max_inflight=100
        )
        orders = await durable.collect(10)
        for msg in orders[:4]:
            await durable.ack(msg)
        queue = await worker.subscribe(
            "audit", queue="grp", durable="qd", manual_acks=True, start=pb.First
        )
        audit = await queue.collect(5)
        for msg in audit[:2]:
            await queue.ack(msg)
        await me.ping()
        await worker.ping()
    return {"orders": orders, "audit": audit}


async def altered_sqlite_store(tmp_path: Path, statement: str) -> Target:
    """A SQLite store written as :func:`write_store` does, then ``statement`` run on it
    (its ``?``, if any, is a garbage value)."""
    target = Target("sqlite", str(tmp_path / "store.db"))
    await write_store(target)
    target.execute(statement, (GARBAGE,) if "?" in statement else ())
    return target


def expected(messages: list[pb.MsgProto]) -> list[dict[str, Any]]:
    return [
        {"sequence": m.sequence, "reply": "", "data": m.data, "timestamp_ns": str(m.timestamp)}
        for m in messages
    ]


async def subscription_records(url: str) -> dict[tuple[str, str], list[int]]:
    """(channel, durable name[:queue]) -> pending sequences, from the state bucket."""
    found = {}
    async with jetstream(url) as js:
        kv = await js.key_value(f"STAN_{CLUSTER}_state")
        for key in await kv.keys():
            kind, *rest = kv_key_parts(key)
            if kind != "sub":
                continue
            snap = spb.SubscriptionSnapshot.FromString((await kv.get(key)).value or b"")
            name = snap.State.durableName or snap.State.qGroup
            found[(rest[0], name)] = sorted(snap.AcksPending)
    return found


@pytest.mark.slow
async def test_an_sql_store_migrates_and_stays_unchanged(
    sql_target: Target, tmp_path: Path, jetstream_url: str
) -> None:
    delivered = await write_store(sql_target)
    before = table_digests(sql_target)
    file_before = file_digests(sql_target.source) if sql_target.driver == "sqlite" else {}
    summary = migrate_json(
        "--config", config_of(sql_target, tmp_path), "--nats", jetstream_url, "--verify"
    )

    assert summary["verified"] is True
    assert summary["source"] == f"SQL store ({sql_target.driver})"
    assert [
        (c["name"], c["first_seq"], c["last_seq"], c["written"]) for c in summary["channels"]
    ] == [
        ("audit", 1, 5, 5),
        ("orders", 1, 10, 10),
    ]
    assert summary["clients"] == 2
    for channel, messages in delivered.items():
        assert await stream_messages(jetstream_url, CLUSTER, channel) == expected(messages)
    pending = await subscription_records(jetstream_url)
    assert pending[("orders", "dur")] == list(range(5, 11))
    assert [v for (c, _), v in pending.items() if c == "audit"] == [[3, 4, 5]]
    assert table_digests(sql_target) == before
    if sql_target.driver == "sqlite":  # not a byte of the file either
        assert file_digests(sql_target.source) == file_before


async def test_a_garbage_row_is_named_or_skipped_and_listed(
    tmp_path: Path, jetstream_url: str
) -> None:
    target = await altered_sqlite_store(tmp_path, "UPDATE Subscriptions SET proto=? WHERE subid=1")
    before, files = table_digests(target), file_digests(target.source)
    args = ("--config", config_of(target, tmp_path), "--nats", jetstream_url)

    refused = run_migrate(*args)
    assert refused.returncode != 0
    assert "table Subscriptions, row subid 1" in refused.stderr, refused.stderr
    assert 'channel "orders"' in refused.stderr, refused.stderr

    summary = migrate_json(*args, "--permissive")
    assert len(summary["skipped_records"]) == 1
    assert "table Subscriptions, row subid 1" in summary["skipped_records"][0]
    pending = await subscription_records(jetstream_url)
    assert ("orders", "dur") not in pending
    assert [v for (c, _), v in pending.items() if c == "audit"] == [[3, 4, 5]]
    assert (table_digests(target), file_digests(target.source)) == (before, files)


async def test_an_undecodable_message_is_named_by_channel_and_sequence(
    tmp_path: Path, jetstream_url: str
) -> None:
    target = await altered_sqlite_store(tmp_path, "UPDATE Messages SET data=? WHERE seq=3")
    done = run_migrate(
        "--config", config_of(target, tmp_path), "--nats", jetstream_url, "--dry-run"
    )
    assert done.returncode != 0
    assert "table Messages, row seq 3" in done.stderr, done.stderr


async def test_the_limits_of_the_config_and_deleted_subscriptions_apply(
    tmp_path: Path, jetstream_url: str
) -> None:
    target = await altered_sqlite_store(
        tmp_path, "UPDATE Subscriptions SET deleted=TRUE WHERE subid=1"
    )
    config = config_of(target, tmp_path, "store_limits: { channels: { orders: { max_msgs: 4 } } }")
    summary = migrate_json("--config", config, "--nats", jetstream_url, "--verify")
    assert [
        (c["name"], c["first_seq"], c["last_seq"], c["written"]) for c in summary["channels"]
    ] == [
        ("audit", 1, 5, 5),
        ("orders", 7, 10, 4),
    ]
    pending = await subscription_records(jetstream_url)
    assert [channel for channel, _ in pending] == ["audit"]


async def test_an_encrypted_store_is_written_decrypted(tmp_path: Path, jetstream_url: str) -> None:
    target = Target("sqlite", str(tmp_path / "store.db"))
    delivered = await write_store(target, "--encrypt", "--encryption_key", "s3cret")
    stored = target.query("SELECT data FROM Messages WHERE seq=1 AND id=1")[0][0]
    assert b"order-1" not in bytes(stored)  # encrypted at rest
    config = config_of(target, tmp_path, "encrypt: true", 'encryption_key: "s3cret"')
    summary = migrate_json("--config", config, "--nats", jetstream_url, "--verify")
    assert summary["verified"] is True
    for channel, messages in delivered.items():
        assert await stream_messages(jetstream_url, CLUSTER, channel) == expected(messages)
