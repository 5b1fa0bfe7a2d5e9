"""The export state: generations written whole, the latest one read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.pipeline.state import STATE_DIR, ExportState, open_state_store


def test_round_trip_and_generations(tmp_path: Path) -> None:
    store = open_state_store(str(tmp_path / "out"))
    assert store.load() == ExportState()
    for n in range(1, 9):
        store.save(ExportState(channels={"a": n}, generation=n - 1, cluster_id="c"))
    state = store.load()
    assert state.channels == {"a": 8} and state.generation == 8 and state.cluster_id == "c"
    names = sorted(p.name for p in (tmp_path / "out" / STATE_DIR).iterdir())
    assert names == [f"state.{n}.json" for n in (4, 5, 6, 7, 8)]


def test_leftover_temporary_files_are_ignored(tmp_path: Path) -> None:
    store = open_state_store(f"file://{tmp_path}/out")
    store.save(ExportState(channels={"a": 3}))
    (tmp_path / "out" / STATE_DIR / ".state.2.json.abc.tmp").write_text("{half")
    assert store.load().channels == {"a": 3}


def test_damaged_state_is_an_error_not_a_restart(tmp_path: Path) -> None:
    store = open_state_store(str(tmp_path))
    store.save(ExportState(channels={"a": 3}))
    (tmp_path / STATE_DIR / "state.2.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"state\.2\.json"):
        store.load()


def test_remote_output_needs_spark(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Spark"):
        open_state_store("hdfs://namenode/exports")
