"""kill -9 of the streaming server again and again: nothing acknowledged lost, durable
positions intact (FILE store, then the SQL store on SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.kill9 import run_kill9

ROUNDS = 10


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("store", ["FILE", "SQL"], ids=["file", "sql-sqlite"])
async def test_kill9_rounds(store: str, nats_url: str, tmp_path: Path) -> None:
    if store == "FILE":
        args = ["-st", "FILE", "--dir", str(tmp_path / "store")]
    else:
        args = ["-st", "SQL", "--sql_driver", "sqlite", "--sql_source", str(tmp_path / "s.db")]
    report = await run_kill9(nats_url, args, tmp_path, rounds=ROUNDS, seed=15)
    assert report.problems == []
    assert report.rounds == ROUNDS
    assert report.acked_publishes > ROUNDS  # the kills came while work was going on
    assert report.stored >= report.acked_publishes
