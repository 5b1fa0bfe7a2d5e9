"""The truncated reference datastore: outcomes without and with truncate_bad_eof."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from stanpkg.stores.file.format import (
    TruncateWitnessError,
    UnexpectedEOFError,
    clear_truncate_witness,
    open_datastore,
)
from tests.stores.filestore_helpers import copy_datastore, datastore_dir, manifest, tree_digest


def _err_lines(log: list[str], root: Path) -> list[str]:
    """The reference's ERR/INF STREAM lines, with {DATASTORE} substituted."""
    out = []
    for line in log:
        for prefix in ("[ERR] STREAM: ", "[INF] STREAM: "):
            if line.startswith(prefix):
                out.append(line[len(prefix) :].replace("{DATASTORE}", str(root)))
    return out


def test_without_option_fails_at_the_cut_record() -> None:
    m = manifest("truncated")
    root = datastore_dir("truncated")
    before = tree_digest(root)
    with pytest.raises(UnexpectedEOFError) as err:
        open_datastore(root)
    exc = err.value
    cut = m["cut"]["cut_record"]
    assert exc.path == str(root / m["cut"]["file"])
    assert exc.offset == cut["record_offset"]
    assert exc.expected == cut["payload_size"] and exc.read == cut["bytes_left_of_payload"]
    assert str(exc) == f'unexpected EOF (file "{exc.path}", offset {cut["record_offset"]})'
    # the same log lines as the reference, from "Unexpected EOF" to the size detail
    ref = _err_lines(m["start_without_option"]["log"], root)
    start = next(i for i, line in enumerate(ref) if line.startswith("Unexpected EOF"))
    assert exc.log_lines(str(root)) == ref[start:]
    assert tree_digest(root) == before  # nothing written


def test_with_option_truncates_and_recovers(tmp_path: Path) -> None:
    m = manifest("truncated")
    root = copy_datastore("truncated", tmp_path)
    ds = open_datastore(root, truncate_bad_eof=True)

    ref = _err_lines(m["expected"]["recovery_log"], root)
    first = next(i for i, line in enumerate(ref) if line.startswith("Verification"))
    last = next(i for i, line in enumerate(ref) if line == "Recovery resumes...")
    assert ds.log == ref[first : last + 1]

    for ch in m["expected"]["channels"]:
        info = ds.channel(ch["name"])
        got = (info.first_seq, info.last_seq, info.msg_count, info.total_bytes)
        assert got == (ch["first_seq"], ch["last_seq"], ch["msgs"], ch["bytes"])
        for e in ch["subscriptions"]:
            (sub,) = [
                s for s in info.subscriptions.values() if s.record.ack_inbox == e["ack_inbox"]
            ]
            # last_sent > last_seq: recorded before the cut
            assert sub.record.last_sent == e["last_sent"] == 6
            assert len(sub.pending) == e["pending_count"]
    for channel, expected in m["expected"]["messages"].items():
        got = list(ds.iter_messages(channel))
        assert [(g.sequence, g.data, g.timestamp) for g in got] == [
            (e["sequence"], base64.b64decode(e["data_b64"]), int(e["timestamp_ns"]))
            for e in expected
        ]

    # message files are byte-identical to what the reference left (index rebuilt the same way)
    for f in m["expected"]["files_after_recovery"]["files"]:
        if "/msgs." in f["path"] or f["path"] == ".truncate.lck":
            data = (root / f["path"]).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (f["size"], f["sha256"])

    # the option works for one open only
    with pytest.raises(TruncateWitnessError, match="should not be opened consecutively"):
        open_datastore(root, truncate_bad_eof=True)
    # read-only opens leave the witness alone; the store clears it when opened normally
    again = open_datastore(root)
    assert again.channel("ticks.cpu").last_seq == 5 and again.log == []
    assert (root / ".truncate.lck").exists()
    clear_truncate_witness(str(root))
    assert not (root / ".truncate.lck").exists()
