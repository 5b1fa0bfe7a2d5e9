"""``stanpkg export`` end to end on a local Spark: incremental runs, archive pick-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stanpkg.pipeline.cli import export_main
from stanpkg.pipeline.export import ExportRequest, prepare_export, run_export
from stanpkg.pipeline.state import STATE_DIR, open_state_store
from tests.pipeline.helpers import (
    append_messages,
    copy_fixture,
    discard_first_slice,
    manifest_rows,
    run_script,
    write_store,
)

pytestmark = pytest.mark.slow


def export(spark: Any, request: ExportRequest) -> int:
    """One run; returns the number of messages exported (0 when nothing was new)."""
    store = open_state_store(request.out)
    job = prepare_export(request, store)
    if job.empty:
        return 0
    return run_export(spark, job, store, progress=lambda line: None).messages


def exported(spark: Any, out: Path) -> list[tuple[str, int]]:
    frame = spark.read.parquet(str(out))
    return sorted((r.channel, r.sequence) for r in frame.select("channel", "sequence").collect())


def test_second_run_exports_only_new_messages(spark: Any, tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"orders": 10, "audit": 5})
    out = tmp_path / "export"
    request = ExportRequest(out=str(out), datastore=str(root))
    assert export(spark, request) == 15
    append_messages(root, "orders", 6)
    append_messages(root, "fresh", 3)
    assert export(spark, request) == 9
    assert export(spark, request) == 0
    got = exported(spark, out)
    expected = [("audit", s) for s in range(1, 6)] + [("fresh", s) for s in range(1, 4)]
    assert got == sorted(expected + [("orders", s) for s in range(1, 17)])
    # Partitioned by channel and UTC date; the state records the last sequences.
    assert (out / "channel=orders" / "date=2023-11-14").is_dir()
    state = json.loads(max((out / STATE_DIR).glob("state.*.json")).read_text())
    assert state["channels"] == {
        "audit": {"last_sequence": 5},
        "fresh": {"last_sequence": 3},
        "orders": {"last_sequence": 16},
    }
    assert state["cluster_id"] == "pipe-test" and state["generation"] == 2


def test_archived_slices_are_exported(spark: Any, tmp_path: Path) -> None:
    root = write_store(tmp_path / "ds", {"c": 12}, slice_max_msgs=4)
    out = tmp_path / "export"
    request = ExportRequest(
        out=str(out), datastore=str(root), include_archived=True, include_removed=True
    )
    # The server discards the oldest slice before the first export; the script archives it.
    dat_bak, idx_bak = discard_first_slice(root, "c")
    assert run_script("c", dat_bak, idx_bak).returncode == 0
    assert export(spark, request) == 12
    append_messages(root, "c", 4, slice_max_msgs=4)
    dat_bak, idx_bak = discard_first_slice(root, "c")
    assert run_script("c", dat_bak, idx_bak).returncode == 0
    assert export(spark, request) == 4
    assert exported(spark, out) == [("c", s) for s in range(1, 17)]
    served = ExportRequest(out=str(tmp_path / "served"), datastore=str(root))  # the default
    assert export(spark, served) == 8  # slices 3 and 4 only


def test_cli_json_with_encryption_key_env(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    copy = copy_fixture("aes", tmp_path)
    monkeypatch.setenv("MY_STAN_KEY", copy.manifest["encryption"]["key"])
    out = tmp_path / "json-out"
    argv = ["--dir", str(copy.datastore), "--out", str(out), "--format", "json",
            "--channels", "secure.*", "--encryption-key-env", "MY_STAN_KEY"]  # fmt: skip
    assert export_main(argv) == 0
    summary = capsys.readouterr().out
    assert summary.startswith("exported 19 messages") and "msg/s" in summary
    frame = spark.read.json(str(out))
    got = sorted(
        (r.channel, r.sequence, r.reply, bytes.fromhex(r.data_hex))
        for r in frame.selectExpr(
            "channel", "sequence", "reply", "hex(unbase64(data)) AS data_hex"
        ).collect()
    )
    assert got == [(c, s, rep, d) for c, s, _, rep, d, _ in manifest_rows(copy)]
    assert export_main(argv) == 0
    assert "nothing new to export" in capsys.readouterr().out


def test_cli_csv_and_errors(spark: Any, tmp_path: Path, capsys: Any) -> None:
    root = write_store(tmp_path / "ds", {"c": 3})
    out = tmp_path / "csv-out"
    assert export_main(["--dir", str(root), "--out", str(out), "--format", "csv"]) == 0
    lines = [p.read_text() for p in out.rglob("*.csv")]
    assert sum(text.count("\n") for text in lines) == 3
    capsys.readouterr()
    assert export_main(["--out", str(out)]) == 2
    assert export_main(["--out", str(out), "--format", "xml"]) == 2
    assert export_main(["--help"]) == 0
    assert export_main(["--dir", str(tmp_path / "missing"), "--out", str(out)]) == 1
    assert "datastore directory not found" in capsys.readouterr().err


def test_cli_damaged_store_failfast_then_permissive(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    copy = copy_fixture("truncated", tmp_path)
    argv = ["--config", str(copy.config), "--out", str(tmp_path / "out")]
    assert export_main(argv) == 1
    err = capsys.readouterr().err
    assert f'file "{copy.datastore}/ticks.cpu/msgs.2.dat", offset 3133' in err
    assert export_main([*argv, "--permissive"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("exported 8 messages") and "1 damaged record(s) skipped" in out.out
    assert "skipping damaged record: unexpected EOF" in out.err
