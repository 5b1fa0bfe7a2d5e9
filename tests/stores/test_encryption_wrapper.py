"""Encryption at rest as a wrapper around every store (MEMORY, FILE, SQL): payloads are
encrypted in the inner store, served decrypted, checked at recovery, and the nonce
counter never restarts below what was stored."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ChannelStore, MessageBatch, Store, StoredRun, StoreError
from stanpkg.stores.crypto import CIPHER_AES, OVERHEAD
from stanpkg.stores.encryption import (
    EncryptingMessageStore,
    EncryptingStore,
    StoreEncryption,
    encryption_from_plan,
)
from stanpkg.stores.factory import create_store
from tests.stores.file.helpers import LogCapture, server_info
from tests.stores.sql.conftest import _target, database_dsns, databases

__all__ = ["database_dsns", "databases"]  # the SQL tests' database fixtures

KEY = ("--encryption_key", "s3cret", "--encryption_cipher", "AES")
WRONG_KEY = ("--encryption_key", "not-the-key", "--encryption_cipher", "AES")
PERSISTENT = ("file", "sqlite", "postgres", "mysql")
T0 = 1_700_000_000_000_000_000


@dataclass
class Backend:
    kind: str
    args: tuple[str, ...]
    log: LogCapture

    def plan(self, *extra: str) -> Plan:
        compiled = compile_args(["-cid", "test", *self.args, *extra], env={})
        assert compiled.plan is not None, compiled.diagnostics
        return compiled.plan

    def open(self, *extra: str) -> Store:
        return create_store(self.plan(*extra), self.log)


def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    kind = str(request.param)
    if kind == "memory":
        args: tuple[str, ...] = ("-st", "memory")
    elif kind == "file":
        args = ("-st", "file", "--dir", str(tmp_path / "store"))
    else:
        target = _target(kind, request.getfixturevalue("databases"), tmp_path)
        args = ("-st", "sql", "--sql_driver", kind, "--sql_source", target.source)
    return Backend(kind, args, LogCapture())


@pytest.fixture(params=("memory", *PERSISTENT))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request, tmp_path)


@pytest.fixture(params=PERSISTENT)
def persistent(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A store that survives a restart."""
    return make_backend(request, tmp_path)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def message(seq: int, data: bytes, reply: str = "", stamp: int = T0) -> bytes:
    """The record of message ``seq`` as subscribers get it."""
    return pb.MsgProto(
        sequence=seq, subject="foo", reply=reply, data=data, timestamp=stamp
    ).SerializeToString()


def payloads(first: int, count: int) -> list[tuple[str, bytes]]:
    """The (reply, data) of messages ``first`` …"""
    return [("", f"secret payload {s}".encode()) for s in range(first, first + count)]


def messages(first: int, count: int) -> list[bytes]:
    """The records of :func:`payloads` stored in a batch stamped T0."""
    return [message(s, data) for s, (_, data) in enumerate(payloads(first, count), first)]


async def store_all(channel: ChannelStore, batch: list[tuple[str, bytes]]) -> list[bytes]:
    """Store one publish batch (stamped T0) and flush it; the records stored."""
    first, last = channel.msgs.store(MessageBatch(T0, batch))
    await channel.msgs.flush()
    sequences = range(first, last + 1)
    return [message(seq, data, reply) for seq, (reply, data) in zip(sequences, batch, strict=True)]


def started(store: Store) -> list[ChannelStore]:
    """Recover (or initialise) as the server does; the recovered channels."""
    state = store.recover()
    if state is None:
        store.init(server_info())
        return []
    return [c.store for c in state.channels]


def stored_data(channel: ChannelStore, seq: int) -> bytes:
    """The ``data`` the inner store holds for ``seq``."""
    msgs = channel.msgs
    assert isinstance(msgs, EncryptingMessageStore)
    raw = msgs.inner.lookup(seq)
    assert raw is not None
    return pb.MsgProto.FromString(raw).data


def nonce_counter(data: bytes) -> int:
    return int.from_bytes(data[5:13], "big")  # code, 4 random bytes, then the counter


def forget_plaintext(channel: ChannelStore) -> None:
    assert isinstance(channel.msgs, EncryptingMessageStore)
    channel.msgs._recent.clear()  # lookups now go to the inner store


def test_payloads_are_encrypted_at_rest_and_round_trip(backend: Backend) -> None:
    async def scenario() -> None:
        store = backend.open(*KEY)
        assert isinstance(store, EncryptingStore)
        started(store)
        channel = store.create_channel("foo")
        assert store.create_channel("foo") is channel  # one wrapper per channel
        records = await store_all(channel, [*payloads(1, 3), ("", b"")])
        assert records == [*messages(1, 3), message(4, b"")]
        assert [channel.msgs.lookup(s) for s in range(1, 5)] == records
        forget_plaintext(channel)
        assert [channel.msgs.lookup(s) for s in range(1, 5)] == records  # decrypted
        for seq in (1, 2, 3):
            data = stored_data(channel, seq)
            assert data[0] == CIPHER_AES and b"secret" not in data
            assert len(data) == len(f"secret payload {seq}") + OVERHEAD
        assert stored_data(channel, 4) == b""  # empty payloads stay plain
        store.close()
        if backend.kind == "file":
            directory = Path(backend.args[-1])
            assert b"secret payload" not in (directory / "foo" / "msgs.1.dat").read_bytes()

    run(scenario)


def test_a_publish_batch_is_sealed_from_its_values(backend: Backend) -> None:
    """A batch comes as values, (reply, data) and one timestamp: the wrapper encrypts
    each message's data and the inner store numbers and encodes the batch (no record is
    built to be decoded again); they read back, one by one and as a run, as the records
    of the values, and the inner store holds the same fields with the data sealed."""

    async def scenario() -> None:
        store = backend.open(*KEY)
        started(store)
        channel = store.create_channel("foo")
        first = [("", b"secret one"), ("_INBOX.reply", b"secret two"), ("r", b"")]
        second = [("", b"a"), ("", b"b")]
        assert channel.msgs.store(MessageBatch(T0, first, ["g1", "g2", "g3"])) == (1, 3)
        assert channel.msgs.store(MessageBatch(T0 + 4, second, ["g4", "g5"])) == StoredRun(4, 5)
        await channel.msgs.flush()
        records = [message(seq, data, reply) for seq, (reply, data) in enumerate(first, 1)]
        records += [
            message(seq, data, reply, T0 + 4) for seq, (reply, data) in enumerate(second, 4)
        ]
        assert [channel.msgs.lookup(s) for s in range(1, 6)] == records  # plaintext kept
        forget_plaintext(channel)
        assert [channel.msgs.lookup(s) for s in range(1, 6)] == records  # decrypted
        assert channel.msgs.lookup_run(1, 5) == records  # decrypted too, not the inner run
        for seq, record in enumerate(records, 1):
            msgs = channel.msgs
            assert isinstance(msgs, EncryptingMessageStore)
            raw = msgs.inner.lookup(seq)
            assert raw is not None
            sealed, plain = pb.MsgProto.FromString(raw), pb.MsgProto.FromString(record)
            assert (sealed.sequence, sealed.subject, sealed.reply, sealed.timestamp) == (
                plain.sequence,
                plain.subject,
                plain.reply,
                plain.timestamp,
            )
            assert sealed.data != plain.data if plain.data else sealed.data == b""
        store.close()

    run(scenario)


def test_wrong_key_fails_recovery(persistent: Backend) -> None:
    async def scenario() -> None:
        store = persistent.open(*KEY)
        started(store)
        await store_all(store.create_channel("foo"), payloads(1, 20))
        store.close()
        store = persistent.open(*WRONG_KEY)
        with pytest.raises(StoreError) as err:
            store.recover()
        store.close()
        text = str(err.value)
        assert text.startswith("unable to recover message store for [foo]: ")
        assert "(cipher: message authentication failed); wrong encryption key?" in text
        if persistent.kind == "file":
            assert f'(file "{persistent.args[-1]}/foo/msgs.1.dat", offset ' in text

    run(scenario)


def test_records_written_before_encryption_are_served(persistent: Backend) -> None:
    async def scenario() -> None:
        store = persistent.open()
        assert not isinstance(store, EncryptingStore)  # no wrapper without encryption
        started(store)
        plain = await store_all(store.create_channel("foo"), payloads(1, 3))
        store.close()
        store = persistent.open(*KEY)
        [channel] = started(store)
        assert [channel.msgs.lookup(s) for s in (1, 2, 3)] == plain
        more = await store_all(channel, payloads(4, 2))
        store.close()
        store = persistent.open(*KEY)
        [channel] = started(store)
        assert [channel.msgs.lookup(s) for s in range(1, 6)] == plain + more
        assert stored_data(channel, 1) == b"secret payload 1"
        assert stored_data(channel, 4)[0] == CIPHER_AES
        store.close()

    run(scenario)


def test_nonce_counter_continues_after_restart(persistent: Backend) -> None:
    async def scenario() -> None:
        store = persistent.open(*KEY)
        started(store)
        await store_all(store.create_channel("foo"), payloads(1, 3))
        store.close()
        store = persistent.open(*KEY)
        [channel] = started(store)
        await store_all(channel, payloads(4, 2))
        nonces = [stored_data(channel, s)[1:13] for s in range(1, 6)]
        assert [nonce_counter(stored_data(channel, s)) for s in range(1, 6)] == [1, 2, 3, 4, 5]
        assert len(set(nonces)) == 5  # no (key, nonce) pair used twice
        store.close()

    run(scenario)


def test_plaintext_before_encryption_and_wrong_key_on_a_shared_inner_store() -> None:
    """The wrapper on its own, around one MEMORY store that outlives it."""
    log = LogCapture()
    plan = compile_args(["-st", "memory", *KEY], env={}).plan
    assert plan is not None
    inner = create_store(plan, log)
    assert isinstance(inner, EncryptingStore)
    memory = inner.inner
    memory.create_channel("foo").msgs.store(MessageBatch(T0, payloads(1, 1)))  # written plain
    first = EncryptingStore(memory, b"s3cret", CIPHER_AES, log)
    channel = first.create_channel("foo")
    assert channel.msgs.lookup(1) == messages(1, 1)[0]
    channel.msgs.store(MessageBatch(T0, payloads(2, 1)))
    other = EncryptingStore(memory, b"not-the-key", CIPHER_AES, log)
    msgs = other.create_channel("foo").msgs
    assert msgs.lookup(1) == messages(1, 1)[0]  # plaintext needs no key
    assert msgs.lookup(2) is None and msgs.lookup(2) is None
    assert log.texts("ERR") == [
        "Error looking up message foo:2 (cipher: message authentication failed; "
        "wrong encryption key?)"
    ]


def test_messages_removed_by_limits_are_not_served_from_plaintext() -> None:
    plan = compile_args(["-st", "memory", "-mm", "2", *KEY], env={}).plan
    assert plan is not None
    store = create_store(plan, LogCapture())
    channel = store.create_channel("foo")
    records = messages(1, 3)
    channel.msgs.store(MessageBatch(T0, payloads(1, 3)))
    assert [channel.msgs.lookup(s) for s in (1, 2, 3)] == [None, *records[1:]]
    assert channel.msgs.state()[1] == sum(len(r) + OVERHEAD for r in records[1:])


def test_key_bytes_are_taken_as_is() -> None:
    plan = compile_args(["--encrypt", "--encryption_cipher", "aes"], env={}).plan
    assert plan is None  # no key anywhere
    env = {"NATS_STREAMING_ENCRYPTION_KEY": " raw "}
    plan = compile_args(["--encrypt", "--encryption_cipher", "aes"], env=env).plan
    assert plan is not None
    assert encryption_from_plan(plan) == StoreEncryption(b" raw ", CIPHER_AES)
    assert "raw" not in repr(encryption_from_plan(plan))
