"""Damaged FILE stores: truncations and bit flips at seeded random offsets of every file
kind (server.dat, clients.dat, subs.dat, msgs.N.dat, msgs.N.idx), recovered the way the
server starts (``FileStore.recover``).

The stores are one written by stanpkg's running store with known messages (several
slices, a client, a durable with pending messages) and the Go-written fixtures of
../shared/fixtures/filestore copied to a temporary directory. Each damaged copy must
either recover with every message before the damage kept, byte for byte, or stop with a
StoreError naming a file of the store and an offset; anything else is a failure. A
recovery refused for a cut record must succeed with ``-file_truncate_bad_eof`` and keep
every message before the cut.

    .venv/bin/python tests/fuzz/store_damage.py --cases 2000 --seed 1
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stanpkg.plan.compile import compile_args
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ClientRecord, MessageBatch, ServerInfo, StoreError, SubRecord
from stanpkg.stores.file import FileStore, FileStoreConfig, config_from_plan
from stanpkg.stores.file.format import RecordScan
from stanpkg.stores.file.format.framing import VERSION_HEADER

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "filestore"
GO_FIXTURES = ("plain", "expired")  # unencrypted ones: a damaged copy is read as is
T0 = 1_700_000_000_000_000_000
_OFFSET = re.compile(r"offset \d+")

Messages = dict[str, dict[int, bytes]]  # channel -> sequence -> stored MsgProto


class _Quiet:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def notice(self, text: str) -> None:
        self.lines.append(text)

    warn = error = notice


def store_config(root: Path, **overrides: object) -> FileStoreConfig:
    """``overrides`` are file options (``truncate_bad_eof=True``)."""
    argv = ["-st", "file", "--dir", str(root), "-cid", "damage", "--file_slice_max_msgs", "5"]
    compiled = compile_args(argv, env={})
    assert compiled.plan is not None, compiled.diagnostics
    config = config_from_plan(compiled.plan)
    return replace(config, options=replace(config.options, **overrides))  # type: ignore[arg-type]


def write_store(root: Path) -> None:
    """Two channels of 23 and 7 messages in 5-message slices, a client, a durable with
    pending messages, written by the running store."""
    store = FileStore(store_config(root), _Quiet())
    assert store.recover() is None
    store.init(ServerInfo.for_cluster("damage", "_STAN.discover"))
    store.add_client(ClientRecord("me", "_INBOX.hb"))
    for name, count in (("ch", 23), ("other.ch", 7)):
        channel = store.create_channel(name)
        for seq in range(1, count + 1):  # one batch each, stamped T0 + seq
            channel.msgs.store(MessageBatch(T0 + seq, [("", f"{name} {seq}".encode() * 3)]))
        channel.subs.create(
            SubRecord("me", "_INBOX.in", "_INBOX.ack", 10, 30, durable_name="d", is_durable=True)
        )
        channel.subs.record_sent(1, list(range(1, count + 1)))
        channel.subs.record_ack(1, 2)
    store.close()


def recovered_messages(root: Path, log: _Quiet | None = None, **overrides: object) -> Messages:
    """Recover as the server does; every stored message by channel and sequence."""
    store = FileStore(store_config(root, **overrides), log or _Quiet())
    try:
        state = store.recover()
        out: Messages = {}
        for channel in state.channels if state else []:
            msgs = channel.store.msgs
            first, last = msgs.first_sequence, msgs.last_sequence
            found = {seq: msgs.lookup(seq) for seq in range(first, last + 1)} if first else {}
            out[channel.store.name] = {seq: rec for seq, rec in found.items() if rec is not None}
        return out
    finally:
        store.close()


def message_spans(root: Path) -> dict[str, list[tuple[int, int, int]]]:
    """Per msgs.N.dat and msgs.N.idx (relative path): (start offset, end offset, sequence)
    of each message's record (data file) or 32-byte entry (index file)."""
    spans: dict[str, list[tuple[int, int, int]]] = {}
    for path in sorted(root.glob("*/msgs.*.dat")):
        data = path.read_bytes()
        rel = str(path.relative_to(root))
        records = [
            (offset, start + size, pb.MsgProto.FromString(data[start : start + size]).sequence)
            for offset, _, start, size in RecordScan(data, str(path), typed=False, crc=None)
        ]
        spans[rel] = records
        entry = 4  # the index holds one entry per record, in the same order
        spans[rel[: -len(".dat")] + ".idx"] = [
            (entry + 32 * i, entry + 32 * (i + 1), seq) for i, (_, _, seq) in enumerate(records)
        ]
    return spans


@dataclass
class Report:
    cases: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def lines(self) -> Iterator[str]:
        yield f"{self.cases} damaged stores recovered"
        for outcome, count in sorted(self.outcomes.items()):
            yield f"  {outcome}: {count}"
        yield f"  failures: {len(self.failures)}"
        for failure in self.failures[:20]:
            yield f"    {failure}"


def _must_keep(
    original: Messages, spans: dict[str, list[tuple[int, int, int]]], rel: str, start: int
) -> Messages:
    """The messages recorded before byte ``start`` of file ``rel`` (all of them when the
    damage is not in a message data file: a damaged index, cut or flipped, is rebuilt from
    the data file, where every record is whole)."""
    if rel not in spans or rel.endswith(".idx"):
        return original
    channel = rel.split("/")[0]
    lost = [seq for begin, end, seq in spans[rel] if end > start]
    if not lost:
        return original
    cut = min(lost)
    kept = dict(original)
    kept[channel] = {seq: rec for seq, rec in original[channel].items() if seq < cut}
    return kept


def _check_kept(got: Messages, keep: Messages, original: Messages) -> str:
    """Every message of ``keep`` there; none returned different from what was stored."""
    for channel, msgs in keep.items():
        for seq, record in msgs.items():
            if got.get(channel, {}).get(seq) != record:
                return f"message {channel}#{seq} lost or changed"
    for channel, msgs in got.items():
        for seq, record in msgs.items():
            if original.get(channel, {}).get(seq) not in (None, record):
                return f"message {channel}#{seq} returned changed"
    return ""


def damage_one(pristine: Path, work: Path, rng: random.Random, report: Report, label: str) -> None:
    original = recovered_messages(pristine)
    spans = message_spans(pristine)
    files = sorted(
        str(p.relative_to(pristine))
        for p in pristine.rglob("*")
        if p.is_file() and p.suffix in (".dat", ".idx")
    )
    rel = rng.choice(files)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    path = work / rel
    data = bytearray(path.read_bytes())
    if not data:
        return
    truncate = rng.random() < 0.5
    offset = rng.randrange(len(data))
    if truncate:
        del data[offset:]
        what = f"{label} {rel} cut at {offset}"
    else:
        data[offset] ^= 1 << rng.randrange(8)
        what = f"{label} {rel} bit flip at {offset}"
    path.write_bytes(bytes(data))
    kind = re.sub(r"\d+", "N", os.path.basename(rel))
    report.cases += 1
    keep = _must_keep(original, spans, rel, offset)
    try:
        log = _Quiet()
        got = recovered_messages(work, log)
    except StoreError as exc:
        text = str(exc)
        if str(work) not in text or (not _OFFSET.search(text) and "version" not in text):
            report.failures.append(f"{what}: error names no file and offset: {text}")
        report.outcomes[f"{kind} {'cut' if truncate else 'flip'}: refused"] += 1
        # The option repairs a cut record of clients.dat, subs.dat or a message file;
        # as in the reference, not a cut version header nor server.dat.
        repairable = "unexpected EOF" in text and "file version" not in text
        if kind == "server.dat":
            _reset_server_file(work, original, report, what)
        elif truncate and repairable:
            _truncate_bad_eof(work, keep, original, report, what, kind)
        return
    except Exception:
        report.failures.append(f"{what}: {traceback.format_exc(limit=-3)}")
        return
    problem = _check_kept(got, keep, original) or _unreported_losses(
        got, original, log, kind if not truncate else "cut", str(path)
    )
    if problem:
        report.failures.append(f"{what}: recovered, but {problem}")
    report.outcomes[f"{kind} {'cut' if truncate else 'flip'}: recovered"] += 1


def _unreported_losses(
    got: Messages, original: Messages, log: _Quiet, kind: str, damaged: str
) -> str:
    """Messages lost are never lost silently: a file cut short is named in the log; a
    record damaged inside a slice is found when read, and the log names the message,
    the file and the offset."""
    lost = [
        (channel, seq)
        for channel, msgs in original.items()
        for seq in msgs
        if seq not in got.get(channel, {})
    ]
    if not lost:
        return ""
    if kind != "msgs.N.dat":
        # The damaged file, or for an index its data file, the slice's other half.
        names = (damaged, damaged.removesuffix(".idx") + ".dat")
        if not any(name in line for line in log.lines for name in names):
            return f"{len(lost)} message(s) lost and {damaged} named nowhere in the log"
        return ""
    for channel, seq in lost:
        said = [line for line in log.lines if f"message {channel}:{seq} " in line]
        if not said or not _OFFSET.search(said[0]):
            return f"message {channel}#{seq} skipped without an error naming its offset"
    return ""


def _reset_server_file(work: Path, original: Messages, report: Report, what: str) -> None:
    """The documented repair of server.dat: cut it to its 4-byte header; the server
    writes it anew and recovers the channels (the reference's v0.25 rule)."""
    path = work / "server.dat"
    path.write_bytes(VERSION_HEADER)  # what `truncate -s 4 server.dat` leaves of a good one
    _recovers_after_repair(
        work,
        original,
        report,
        f"{what} (server.dat reset)",
        "server.dat: recovered once cut to its header",
    )


def _recovers_after_repair(
    work: Path, original: Messages, report: Report, repair: str, outcome: str
) -> None:
    """After a documented repair the store must recover exactly the original messages."""
    try:
        got = recovered_messages(work)
    except Exception:
        report.failures.append(f"{repair}: {traceback.format_exc(limit=-3)}")
        return
    if got != original:
        count = sum(map(len, got.values()))
        report.failures.append(f"{repair}: recovered {count} messages, not the original ones")
        return
    report.outcomes[outcome] += 1


def _truncate_bad_eof(
    work: Path, keep: Messages, original: Messages, report: Report, what: str, kind: str
) -> None:
    try:
        got = recovered_messages(work, truncate_bad_eof=True)
    except StoreError as exc:
        report.outcomes[f"{kind} cut: refused with -file_truncate_bad_eof"] += 1
        if "unexpected EOF" in str(exc):
            report.failures.append(f"{what}: -file_truncate_bad_eof still fails: {exc}")
        return
    except Exception:
        report.failures.append(f"{what} (-file_truncate_bad_eof): {traceback.format_exc(limit=-3)}")
        return
    problem = _check_kept(got, keep, original)
    if problem:
        report.failures.append(f"{what}: -file_truncate_bad_eof: {problem}")
    report.outcomes[f"{kind} cut: recovered with -file_truncate_bad_eof"] += 1


def run(cases: int, seed: int, tmp: Path) -> Report:
    rng = random.Random(seed)
    report = Report()
    pristines: list[tuple[str, Path]] = []
    ours = tmp / "stanpkg-store"
    write_store(ours)
    pristines.append(("stanpkg", ours))
    for name in GO_FIXTURES:
        source = FIXTURES / name / "datastore"
        if source.is_dir():
            copy = tmp / f"go-{name}"
            shutil.copytree(source, copy)
            for entry in copy.rglob("*"):
                entry.chmod(0o700 if entry.is_dir() else 0o600)
            (copy / ".truncate.lck").unlink(missing_ok=True)
            pristines.append((f"go {name}", copy))
    for case in range(cases):
        label, pristine = pristines[case % len(pristines)]
        damage_one(pristine, tmp / "work", rng, report, label)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.cases, args.seed, Path(tmp))
    print("\n".join(report.lines()))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
