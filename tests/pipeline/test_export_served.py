"""``stanpkg export`` by default exports what the server serves: on the same store, a
server's recovery and the export agree on every channel's first/last sequence and
messages (removed-but-on-disk and archived messages only when asked for)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.pipeline.batches import read_task_batches
from stanpkg.pipeline.export import ExportRequest, prepare_export
from stanpkg.pipeline.options import ReadOptions
from stanpkg.pipeline.planning import plan_read
from stanpkg.pipeline.state import open_state_store
from stanpkg.plan.compile import compile_args
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.factory import create_store
from stanpkg.stores.file.format import open_datastore
from stanpkg.stores.file.format.framing import crc32_func, encode_record
from tests.pipeline.helpers import copy_fixture, discard_first_slice
from tests.stores.file.helpers import LogCapture
from tests.stores.filestore_helpers import tree_digest

Message = tuple[int, str, str, bytes, int]  # sequence, subject, reply, data, timestamp
Ranges = dict[str, tuple[int, int]]


def exported(request: ExportRequest) -> tuple[Ranges, dict[str, list[Message]]]:
    """What one export run would write: its per-channel ranges and messages (read the way
    the Spark source reads them, without Spark)."""
    job = prepare_export(request, open_state_store(request.out))
    options = ReadOptions.parse(request.source_options())
    plan = plan_read(options)
    messages: dict[str, list[Message]] = {}
    for task in plan.tasks:
        lo, hi = job.ranges[task.slice.channel]
        assert lo <= task.from_seq and task.to_seq <= hi
        for batch in read_task_batches(task, plan.reader, permissive=False):
            d = batch.to_pydict()
            columns = ("sequence", "subject", "reply", "data", "timestamp_ns")
            rows = zip(*(d[c] for c in columns), strict=True)
            messages.setdefault(task.slice.channel, []).extend(rows)
    return job.ranges, {c: sorted(m) for c, m in messages.items()}


def served(config: Path) -> dict[str, tuple[int, int, list[Message]]]:
    """Per channel: first and last sequence and the messages a server recovering the
    store serves."""
    compiled = compile_args(["-sc", str(config)], {})
    assert compiled.plan is not None, compiled.diagnostics
    store = create_store(compiled.plan, LogCapture())
    try:
        state = store.recover()
        assert state is not None
        out = {}
        for channel in state.channels:
            msgs = channel.store.msgs
            first, last = msgs.first_sequence, msgs.last_sequence
            found = []
            for seq in range(first, last + 1):
                raw = msgs.lookup(seq)
                assert raw is not None, (channel.store.name, seq)
                m = pb.MsgProto.FromString(raw)
                found.append((m.sequence, m.subject, m.reply, m.data, m.timestamp))
            out[channel.store.name] = (first, last, found)
        return out
    finally:
        store.close()


def assert_agree(config: Path, out: Path) -> None:
    ranges, messages = exported(ExportRequest(out=str(out), config=str(config)))
    server = served(config)
    for channel, (first, last, msgs) in server.items():
        if not msgs:  # nothing served (never had a message, or every one removed)
            assert channel not in ranges and channel not in messages
            continue
        assert ranges[channel] == (first, last), channel
        assert messages[channel] == msgs, channel
    assert set(ranges) <= set(server)


@pytest.mark.parametrize("name", ["plain", "aes", "expired"])
def test_default_export_is_what_the_server_serves(tmp_path: Path, name: str) -> None:
    copy = copy_fixture(name, tmp_path)
    assert_agree(copy.config, tmp_path / "out")
    if name == "plain":  # max_msgs removed sequence 5 of orders.created, still on disk
        ranges, _ = exported(
            ExportRequest(out=str(tmp_path / "all"), config=str(copy.config), include_removed=True)
        )
        assert ranges["orders.created"] == (5, 15)
    if name == "expired":  # every message of ephemeral.readings expired, one still on disk
        ranges, _ = exported(
            ExportRequest(out=str(tmp_path / "all"), config=str(copy.config), include_removed=True)
        )
        assert ranges["ephemeral.readings"] == (5, 5)


def test_archived_slices_only_when_asked(tmp_path: Path) -> None:
    copy = copy_fixture("plain", tmp_path)
    discard_first_slice(copy.datastore, "audit.trail")  # the server would have renamed it
    ranges, _ = exported(ExportRequest(out=str(tmp_path / "served"), config=str(copy.config)))
    assert ranges["audit.trail"] == (5, 7)
    ranges, _ = exported(
        ExportRequest(out=str(tmp_path / "all"), config=str(copy.config), include_archived=True)
    )
    assert ranges["audit.trail"] == (1, 7)


def test_unindexed_tail_is_kept_by_both(tmp_path: Path) -> None:
    """A whole record written to the data file after the index's last entry (the index
    lost its last entries, or a crash came between the two writes of a batch): it passes
    its CRC, so readers serve it without writing and the server indexes it again; both
    say the channel ends with it."""
    copy = copy_fixture("plain", tmp_path)
    ds = open_datastore(copy.datastore)
    last = ds.slices("payments.settled")[-1]
    extra = pb.MsgProto(sequence=last.last_seq + 1, subject="payments.settled", data=b"kept")
    with open(last.dat_path, "ab") as f:
        f.write(encode_record(extra.SerializeToString(), crc32_func()))
    before = tree_digest(copy.datastore)
    again = open_datastore(copy.datastore)
    assert again.channel("payments.settled").last_seq == last.last_seq + 1
    assert any("Recovering them from data file" in line for line in again.log)
    assert tree_digest(copy.datastore) == before  # readers never write
    assert_agree(copy.config, tmp_path / "out")
