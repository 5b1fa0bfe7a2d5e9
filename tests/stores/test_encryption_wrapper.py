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
from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores import encryption
from stanpkg.stores.base import ChannelStore, Store, StoreError
from stanpkg.stores.crypto import CIPHER_AES, OVERHEAD, PayloadCipher
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


def message(seq: int, data: bytes) -> bytes:
    return pb.MsgProto(
        sequence=seq, subject="foo", data=data, timestamp=T0 + seq
    ).SerializeToString()


def messages(first: int, count: int) -> list[bytes]:
    return [message(s, f"secret payload {s}".encode()) for s in range(first, first + count)]


async def store_all(channel: ChannelStore, records: list[bytes]) -> None:
    first = channel.msgs.last_sequence + 1
    channel.msgs.store(records, [T0 + s for s in range(first, first + len(records))])
    await channel.msgs.flush()


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
        records = [*messages(1, 3), message(4, b"")]
        await store_all(channel, records)
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


def test_a_publish_batch_is_sealed_from_its_fields(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's batches come with their (reply, data) and one timestamp: the wrapper
    builds the encrypted records from those, without decoding a record, and they read
    back as the very records stored; a batch of several timestamps is sealed record by
    record. Both give the inner store the same layout."""

    decoded: list[bytes] = []
    record_by_record = encryption.encrypt_record

    def counted(record: bytes, cipher: PayloadCipher) -> bytes:
        decoded.append(record)
        return record_by_record(record, cipher)

    monkeypatch.setattr(encryption, "encrypt_record", counted)

    async def scenario() -> None:
        store = backend.open(*KEY)
        started(store)
        channel = store.create_channel("foo")
        fields = [("", b"secret one"), ("_INBOX.reply", b"secret two"), ("r", b"")]
        batch = MsgEncoder("foo", T0).encode_run(1, fields)
        channel.msgs.store(batch, [T0] * 3, ["g1", "g2", "g3"], fields)
        mixed = messages(4, 2)  # T0 + 4, T0 + 5
        channel.msgs.store(mixed, [T0 + 4, T0 + 5], ["g4", "g5"], [("", b"a"), ("", b"b")])
        await channel.msgs.flush()
        assert decoded == mixed  # the batch of one timestamp was not decoded
        records = [*batch, *mixed]
        forget_plaintext(channel)
        assert [channel.msgs.lookup(s) for s in range(1, 6)] == records  # decrypted
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
        await store_all(store.create_channel("foo"), messages(1, 20))
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
        plain = messages(1, 3)
        await store_all(store.create_channel("foo"), plain)
        store.close()
        store = persistent.open(*KEY)
        [channel] = started(store)
        assert [channel.msgs.lookup(s) for s in (1, 2, 3)] == plain
        more = messages(4, 2)
        await store_all(channel, more)
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
        await store_all(store.create_channel("foo"), messages(1, 3))
        store.close()
        store = persistent.open(*KEY)
        [channel] = started(store)
        await store_all(channel, messages(4, 2))
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
    memory.create_channel("foo").msgs.store(messages(1, 1), [T0 + 1])  # written plain
    first = EncryptingStore(memory, b"s3cret", CIPHER_AES, log)
    channel = first.create_channel("foo")
    assert channel.msgs.lookup(1) == messages(1, 1)[0]
    channel.msgs.store(messages(2, 1), [T0 + 2])
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
    channel.msgs.store(records, [T0 + s for s in (1, 2, 3)])
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
