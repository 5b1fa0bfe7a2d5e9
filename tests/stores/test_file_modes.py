"""FILE store files and directories are private to the server's user (0600 / 0700),
whatever the umask lets through: messages, index, subscriptions, clients, server
information, the root lock, the truncation witness, compacted and rebuilt files."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from stanpkg.stores.base import ClientRecord, SubRecord
from tests.stores.file.helpers import T0, fresh_store, open_store, store_messages


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # the usual default: 0644 files, 0755 directories
    try:
        yield
    finally:
        os.umask(previous)


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        out[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return out


def _assert_private(root: Path) -> None:
    modes = _modes(root)
    wrong = {
        name: oct(mode)
        for name, mode in modes.items()
        if mode != (0o700 if (root / name).is_dir() else 0o600)
    }
    assert wrong == {}


def test_a_new_store_is_private(tmp_path: Path) -> None:
    root = tmp_path / "data" / "store"
    store, _ = fresh_store(root, "--file_slice_max_msgs", "2")
    store.add_client(ClientRecord("me", "_INBOX.hb"))
    store.add_client(ClientRecord("gone", "_INBOX.hb2"))
    store.delete_client("gone")
    channel = store.create_channel("orders.created")
    store_messages(channel.msgs, "orders.created", 1, 5, timestamp=T0)  # three slices
    channel.subs.create(SubRecord("me", "_INBOX.in", "_INBOX.ack", 10, 30))
    channel.subs.record_sent(1, [1, 2, 3])
    store.close()
    assert {p.name for p in (root / "orders.created").iterdir()} >= {
        "msgs.1.dat",
        "msgs.1.idx",
        "msgs.3.dat",
        "subs.dat",
    }
    assert (root / ".rootdir.lck").exists()
    _assert_private(root)


def test_files_written_at_recovery_are_private(tmp_path: Path) -> None:
    """A rebuilt index, the -file_truncate_bad_eof witness, clients.dat created anew."""
    root = tmp_path / "store"
    store, _ = fresh_store(root)
    channel = store.create_channel("ch")
    store_messages(channel.msgs, "ch", 1, 3, timestamp=T0)
    store.close()
    (root / "ch" / "msgs.1.idx").unlink()
    (root / "clients.dat").unlink()
    store, _ = open_store(root, truncate_bad_eof=True)
    state = store.recover()
    assert state is not None and state.channels[0].store.msgs.last_sequence == 3
    store.close()
    assert (root / ".truncate.lck").exists() and (root / "ch" / "msgs.1.idx").exists()
    _assert_private(root)


def test_an_existing_directory_keeps_the_mode_the_operator_gave_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir(mode=0o750)
    store, _ = fresh_store(root)
    store.close()
    assert stat.S_IMODE(root.stat().st_mode) == 0o750
    assert stat.S_IMODE((root / "server.dat").stat().st_mode) == 0o600


def test_a_clustered_nodes_directories_are_private(tmp_path: Path) -> None:
    """The node ID file and the embedded nats-server's JetStream directory (the cluster
    log path), which stanpkg creates before nats-server starts."""
    from stanpkg.node import lock_cluster_log_path, resolve_cluster_identity
    from stanpkg.plan.compile import compile_args

    store_dir, log_path = tmp_path / "store", tmp_path / "raft"
    argv = ["-cid", "modes", "-clustered", "-cluster_bootstrap", "-cluster_node_id", "a"]
    argv += ["-st", "file", "-dir", str(store_dir), "-cluster_log_path", str(log_path)]
    compiled = compile_args(argv, env={})
    assert compiled.plan is not None, compiled.diagnostics
    plan = resolve_cluster_identity(compiled.plan)
    held = lock_cluster_log_path(plan)
    assert held is not None
    held.close()  # type: ignore[attr-defined]
    _assert_private(store_dir)
    _assert_private(log_path)
    assert {p.name for p in store_dir.iterdir()} and {p.name for p in log_path.iterdir()}
