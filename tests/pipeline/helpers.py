"""Stores for the pipeline tests: fixture copies (with their server config) and stores
written with stanpkg's FILE store writers."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from stanpkg.stores.base import ServerInfo
from stanpkg.stores.crypto import channel_cipher
from stanpkg.stores.file.format import ChannelWriter, SliceLimits, open_datastore, write_server_file
from tests.stores.filestore_helpers import FIXTURES, manifest, require_fixtures

BASE_TS = 1_700_000_000_000_000_000  # 2023-11-14T22:13:20Z
TS_STEP = 1_000_000_000  # one message per second


@dataclass(frozen=True)
class FixtureCopy:
    name: str
    datastore: Path
    config: Path
    manifest: dict[str, Any]

    def expected(self) -> dict[str, list[dict[str, Any]]]:
        messages: dict[str, list[dict[str, Any]]] = self.manifest["expected"]["messages"]
        return messages


def copy_fixture(name: str, dest: Path) -> FixtureCopy:
    """A writable copy of a fixture and its production config pointing at the copy."""
    require_fixtures()
    m = manifest(name)
    target = dest / name / "datastore"
    shutil.copytree(FIXTURES / name / "datastore", target)
    for root, dirs, files in os.walk(target):
        for entry in dirs + files:
            p = os.path.join(root, entry)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    config = dest / name / "stan.conf"
    config.write_text(m["production"]["server_config"].replace("{DATASTORE}", str(target)))
    return FixtureCopy(name, target, config, m)


def message_payload(channel: str, seq: int) -> bytes:
    return f"{channel} #{seq} ".encode() * (1 + seq % 3)


def write_store(
    root: Path,
    channels: dict[str, int],
    *,
    slice_max_msgs: int = 4,
    key: bytes | None = None,
    cluster_id: str = "pipe-test",
) -> Path:
    """A datastore written with our writers: ``channels`` maps name -> message count."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "server.dat").exists():
        write_server_file(
            str(root / "server.dat"), ServerInfo.for_cluster(cluster_id, "_STAN.discover")
        )
    for name, count in channels.items():
        append_messages(root, name, count, slice_max_msgs=slice_max_msgs, key=key)
    return root


def append_messages(
    root: Path, channel: str, count: int, *, slice_max_msgs: int = 4, key: bytes | None = None
) -> tuple[int, int]:
    """Append ``count`` messages after the channel's last; returns the new (first, last)."""
    last_slice = None
    last_seq = 0
    if (root / channel).is_dir():
        info = open_datastore(root).channel(channel)
        last_seq = info.last_seq
        last_slice = info.slices[-1] if info.slices else None
    cipher = channel_cipher(key, channel, next_seq=last_seq + 1) if key else None
    with ChannelWriter(
        str(root / channel),
        channel,
        slice_limits=SliceLimits(max_msgs=slice_max_msgs),
        cipher=cipher,
        last_slice=last_slice,
    ) as writer:
        for seq in range(last_seq + 1, last_seq + count + 1):
            reply = f"{channel}.reply.{seq}" if seq % 5 == 0 else ""
            writer.append(seq, message_payload(channel, seq), BASE_TS + seq * TS_STEP, reply=reply)
    return last_seq + 1, last_seq + count


def discard_first_slice(root: Path, channel: str) -> tuple[Path, Path]:
    """Do what the server does to a slice it discards with an archive script: rename its
    files to .bak (filestore.md §8.3); returns the two .bak paths."""
    numbers = sorted(int(p.name.split(".")[1]) for p in (root / channel).glob("msgs.*.dat"))
    dat = root / channel / f"msgs.{numbers[0]}.dat"
    idx = root / channel / f"msgs.{numbers[0]}.idx"
    dat_bak, idx_bak = Path(f"{dat}.bak"), Path(f"{idx}.bak")
    dat.rename(dat_bak)
    idx.rename(idx_bak)
    return dat_bak, idx_bak


class DiscardedSlice(NamedTuple):
    root: Path  # the datastore
    dat: Path  # the first slice's files, renamed to .bak
    idx: Path
    archive: Path  # where the archive script puts channel c's slices by default


def run_script(channel: str, dat: Path, idx: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The archive script, exec'd with exactly the three arguments the server passes, from
    the server's cwd."""
    return subprocess.run(
        [sys.executable, "-m", "stanpkg.pipeline.archive", channel, str(dat), str(idx)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        cwd=Path(__file__).resolve().parents[2],
    )


def manifest_rows(copy: FixtureCopy) -> list[tuple[str, int, str, str, bytes, int]]:
    """(channel, sequence, subject, reply, data, timestamp_ns) the manifest lists."""
    import base64

    rows = []
    for channel, messages in copy.expected().items():
        for m in messages:
            rows.append(
                (
                    channel,
                    m["sequence"],
                    m["subject"],
                    m["reply"],
                    base64.b64decode(m["data_b64"]),
                    int(m["timestamp_ns"]),
                )
            )
    return sorted(rows)


def dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
