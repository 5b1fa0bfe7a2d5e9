"""Encryption at rest, the directory lock, and the file descriptor soft limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import MessageBatch, StoreError
from stanpkg.stores.encryption import EncryptingMessageStore
from stanpkg.stores.factory import create_store
from stanpkg.stores.file.format import open_datastore
from tests.stores.file.helpers import (
    ROOT,
    T0,
    LogCapture,
    fresh_store,
    open_store,
    payload,
    plan_for,
    records,
    store_messages,
)
from tests.stores.file.test_recovery import fixture_store

KEY = "s3cret-key"


@pytest.mark.parametrize(("cipher", "code"), [("AES", 1), ("CHACHA", 2)])
def test_encrypted_roundtrip(tmp_path: Path, cipher: str, code: int) -> None:
    args = ("--encryption_key", KEY, "--encryption_cipher", cipher)
    store, _ = fresh_store(tmp_path, *args)
    ch = store.create_channel("foo")
    messages = [("", payload(seq)) for seq in range(1, 5)] + [("", b"")]  # the last empty
    ch.msgs.store(MessageBatch(T0, messages))
    recs = records("foo", 1, 4, timestamp=T0)
    recs.append(pb.MsgProto(sequence=5, subject="foo", timestamp=T0).SerializeToString())
    assert [ch.msgs.lookup(s) for s in range(1, 6)] == recs  # from the cache
    store.close()
    raw = (tmp_path / "foo" / "msgs.1.dat").read_bytes()
    assert b"msg-1" not in raw
    ds = open_datastore(tmp_path)  # no key: the stored form
    stored = [m.data for m in ds.iter_messages("foo")]
    assert [d[0] for d in stored[:4]] == [code] * 4 and stored[4] == b""
    assert (
        ds.channel("foo").total_bytes == sum(len(r) + 29 + 40 for r in recs[:4]) + len(recs[4]) + 40
    )
    ds = open_datastore(tmp_path, encryption_key=KEY.encode())
    assert next(m.data for m in ds.iter_messages("foo")) == b"msg-1".ljust(16, b".")
    # the other cipher reads it too (the code byte decides), from disk
    other = "CHACHA" if cipher == "AES" else "AES"
    store, _ = open_store(tmp_path, "--encryption_key", KEY, "--encryption_cipher", other)
    state = store.recover()
    assert state is not None
    assert [state.channels[0].store.msgs.lookup(s) for s in range(1, 6)] == recs
    store.close()


def test_unencrypted_records_read_as_is(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path)
    ch = store.create_channel("foo")
    recs = store_messages(ch.msgs, "foo", 1, 3, timestamp=T0)
    store.close()
    store, _ = open_store(tmp_path, "--encryption_key", KEY)
    state = store.recover()
    assert state is not None
    msgs = state.channels[0].store.msgs
    more = store_messages(msgs, "foo", 4, 2, timestamp=T0 + 1)
    store.close()
    store, _ = open_store(tmp_path, "--encryption_key", KEY)
    state = store.recover()
    assert state is not None
    assert [state.channels[0].store.msgs.lookup(s) for s in range(1, 6)] == recs + more
    store.close()


@pytest.mark.parametrize("name", ["aes", "chacha"])
def test_wrong_key_refuses_to_start(tmp_path: Path, name: str) -> None:
    store, _, root, _ = fixture_store(name, tmp_path, "--encryption_key", "not-the-key")
    with pytest.raises(StoreError) as err:
        store.recover()
    store.close()
    text = str(err.value)
    reason = "cipher" if name == "aes" else "chacha20poly1305"
    assert text.startswith("unable to recover message store for [")
    assert f"({reason}: message authentication failed); wrong encryption key?" in text
    assert f'(file "{root}/' in text and "offset" in text


def test_wrong_key_at_lookup_is_logged_not_delivered(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--encryption_key", KEY)
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 3, timestamp=T0)
    store.close()
    # bypass the recovery check to look at the lookup path
    store, log = open_store(tmp_path, "--encryption_key", "wrong", "--file_crc=false")
    real = EncryptingMessageStore.check_key
    EncryptingMessageStore.check_key = lambda self: None  # type: ignore[method-assign]
    try:
        state = store.recover()
    finally:
        EncryptingMessageStore.check_key = real  # type: ignore[method-assign]
    assert state is not None
    msgs = state.channels[0].store.msgs
    assert msgs.lookup(1) is None and msgs.lookup(1) is None
    assert log.texts("ERR") == [
        "Error looking up message foo:1 (cipher: message authentication failed; "
        "wrong encryption key?)"
    ]
    store.close()


def test_encryption_key_required_and_cipher_checked(tmp_path: Path) -> None:
    # The plan compiler already refuses both; the store does not rely on it.
    from dataclasses import replace

    from stanpkg.plan.model import Secret

    plan = replace(plan_for(tmp_path), encrypt=True, encryption_key=Secret(""))
    with pytest.raises(StoreError, match=r"^encryption key required$"):
        create_store(plan, LogCapture())
    plan = replace(plan, encryption_key=Secret("k"), encryption_cipher="ROT13")
    with pytest.raises(StoreError, match=r"^encryption cipher not supported$"):
        create_store(plan, LogCapture())


def test_second_store_on_same_directory_is_refused(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path)
    with pytest.raises(StoreError, match="is in use by another server"):
        open_store(tmp_path)
    code = (
        "import sys\n"
        "from stanpkg.stores.base import StoreError\n"
        "from tests.stores.file.helpers import open_store\n"
        "try:\n"
        "    open_store(sys.argv[1])\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 3, done.stderr
    assert f'lock file "{tmp_path}/.rootdir.lck" is held' in done.stdout
    store.close()
    again, _ = open_store(tmp_path)  # released on close
    again.close()
    assert (tmp_path / ".rootdir.lck").read_bytes() == b""


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_descriptor_limit_with_more_channels_than_descriptors(tmp_path: Path) -> None:
    limit = 12
    baseline = open_fds()
    store, _ = fresh_store(tmp_path, "--file_fds_limit", str(limit), "--file_slice_max_msgs", "2")
    channels = [store.create_channel(f"ch{i}") for i in range(40)]
    peak = 0
    for round_ in range(3):
        for i, ch in enumerate(channels):
            first = round_ * 3 + 1
            store_messages(ch.msgs, f"ch{i}", first, 3, timestamp=T0 + first)
            ch.subs.record_sent(0, [first])
            peak = max(peak, open_fds() - baseline)
            assert store.env.pool.open_fds <= limit
    for ch in channels:  # read everything back from disk, slice by slice
        ch.msgs._cache.clear()  # type: ignore[attr-defined]
        assert [
            pb.MsgProto.FromString(ch.msgs.lookup(s) or b"").sequence for s in range(1, 10)
        ] == list(range(1, 10))
        peak = max(peak, open_fds() - baseline)
    assert peak <= limit + 2  # + the lock file and a transient descriptor
    store.close()
    assert open_fds() <= baseline + 1
    ds = open_datastore(tmp_path)
    assert {ds.channel(f"ch{i}").last_seq for i in range(40)} == {9}


def test_idle_slice_files_are_closed(tmp_path: Path) -> None:
    store, _ = fresh_store(tmp_path, "--file_slice_max_msgs", "2")
    ch = store.create_channel("foo")
    store_messages(ch.msgs, "foo", 1, 6, timestamp=T0)
    ch.msgs._cache.clear()  # type: ignore[attr-defined]
    assert ch.msgs.lookup(1) is not None
    pool = store.env.pool
    assert pool.open_fds >= 4  # write slice + the read files of slice 1
    clock = [0.0]
    pool.clock = lambda: clock[0]
    for handle in list(pool._lru):  # type: ignore[attr-defined]
        handle.last_used = 0.0
    clock[0] = 5.0
    pool.close_idle(1.0)
    assert all(not h.idle_closable for h in pool._lru)  # type: ignore[attr-defined]
    assert ch.msgs.lookup(2) is not None  # reopened on demand
    store.close()
