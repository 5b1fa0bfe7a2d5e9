"""Shared helpers for the FILE store format tests.

The reference datastores live in the read-only shared folder; tests that may write work
on copies in tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from stanpkg.plan.limits import Limits
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ClientRecord, ServerInfo, SubRecord
from stanpkg.stores.file.format import StoredMessage


def _fixtures_root() -> Path:
    env = os.environ.get("STANPKG_FILESTORE_FIXTURES")
    if env:
        return Path(env)
    beside_repo = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "filestore"
    if beside_repo.is_dir():
        return beside_repo
    return Path("/work/shared/fixtures/filestore")


FIXTURES = _fixtures_root()
FIXTURE_NAMES = ("plain", "aes", "chacha", "truncated", "expired")


def require_fixtures() -> None:
    if not FIXTURES.is_dir():
        pytest.skip(f"FILE store fixtures not found at {FIXTURES}")


def manifest(name: str) -> dict[str, Any]:
    require_fixtures()
    with open(FIXTURES / name / "MANIFEST.json") as f:
        data: dict[str, Any] = json.load(f)
    return data


def datastore_dir(name: str) -> Path:
    require_fixtures()
    return FIXTURES / name / "datastore"


def copy_datastore(name: str, dest: Path) -> Path:
    """Writable copy of a fixture datastore."""
    target = dest / f"{name}-copy"
    shutil.copytree(datastore_dir(name), target)
    for root, dirs, files in os.walk(target):
        for entry in dirs + files:
            p = os.path.join(root, entry)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return target


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root (to prove nothing was written)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def limits_from_manifest(m: dict[str, Any]) -> dict[str, Limits]:
    """Per-channel effective limits as reported by /streaming/storez."""
    limits = m["expected"]["limits"]
    out = {}
    for ch in m["expected"]["channels"]:
        lim = limits.get("channels", {}).get(ch["name"], limits)
        out[ch["name"]] = Limits(
            max_subs=0,
            max_msgs=lim["max_msgs"],
            max_bytes=lim["max_bytes"],
            max_age=lim["max_age"],
            max_inactivity=0,
        )
    return out


def encryption_key(m: dict[str, Any]) -> bytes | None:
    enc = m["encryption"]
    return bytes.fromhex(enc["key_bytes_hex"]) if enc else None


def make_small_store(root: Path, *, key: bytes | None = None, n: int = 6) -> Path:
    """A datastore written with our writers: one channel "ch" of n messages, 3 per slice,
    a client and a durable subscription with pending messages."""
    from stanpkg.stores.crypto import channel_cipher
    from stanpkg.stores.file.format import (
        ChannelWriter,
        ClientsFileWriter,
        SliceLimits,
        SubsFileWriter,
        write_server_file,
    )

    root.mkdir(parents=True)
    write_server_file(str(root / "server.dat"), ServerInfo.for_cluster("small", "_STAN.discover"))
    with ClientsFileWriter(str(root / "clients.dat")) as cw:
        cw.add(ClientRecord("me", "hb"))
        cw.add(ClientRecord("gone", "hb2"))
        cw.delete("gone")
    cipher = channel_cipher(key, "ch") if key else None
    with ChannelWriter(
        str(root / "ch"), "ch", slice_limits=SliceLimits(max_msgs=3), cipher=cipher
    ) as w:
        for seq in range(1, n + 1):
            w.append(seq, f"payload number {seq}".encode(), 1_700_000_000_000_000_000 + seq)
    with SubsFileWriter(str(root / "ch" / "subs.dat")) as sw:
        sw.new(SubRecord("me", "", "a", 0, 0, durable_name="d", is_durable=True, id=1))
        for seq in range(1, n + 1):
            sw.sent(1, seq)
        sw.acked(1, 1)
    return root


def message_record(m: StoredMessage) -> bytes:
    """The MsgProto bytes a slice holds for a message read back: the fields the server sets."""
    return pb.MsgProto(
        sequence=m.sequence, subject=m.subject, reply=m.reply, data=m.data, timestamp=m.timestamp
    ).SerializeToString()
