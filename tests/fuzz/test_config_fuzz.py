"""A bounded, seeded run of tests/fuzz/config_fuzz.py: a few thousand mutated and
generated configurations through what ``stanpkg validate`` does, every one ending in
diagnostics or success within 1 s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fuzz import config_fuzz
from tests.fuzz.config_inputs import load_seeds, make_input, write_include_files

INPUTS = 3000


def test_config_fuzz_fixed_seed() -> None:
    counts = config_fuzz.campaign(INPUTS, workers=1, seed=15, progress_every=3600)
    print(config_fuzz._line(counts, 1))
    assert [f.detail for f in counts.findings] == []
    assert (counts.tracebacks, counts.hangs) == (0, 0)
    assert counts.total == INPUTS
    # Both ends are reached: inputs the compiler refuses and inputs it turns into a plan.
    assert counts.diagnostics > INPUTS // 10
    assert counts.success > INPUTS // 20


def test_inputs_are_a_function_of_seed_and_index() -> None:
    seeds = load_seeds()
    assert make_input(15, 123, seeds) == make_input(15, 123, seeds)
    assert make_input(15, 123, seeds) != make_input(16, 123, seeds)


def test_a_crash_is_counted_and_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness itself: an exception and an input that never ends are findings, each
    saved with how it was run."""

    def failing(argv: list[str]) -> bool:
        text = Path(argv[-1]).read_bytes()
        if len(text) % 2:
            raise ValueError("odd")
        time.sleep(5)  # the watchdog ends this after 1 s
        return True

    monkeypatch.setattr(config_fuzz, "validate", failing)
    monkeypatch.setattr(config_fuzz, "CRASHES", tmp_path / "crashes")
    write_include_files(tmp_path)
    counts = config_fuzz.run_range(15, 0, 4, load_seeds(), tmp_path)
    assert counts.tracebacks + counts.hangs == 4 and counts.hangs >= 1
    kinds = {f.kind for f in counts.findings}
    assert "hang" in kinds
    saved = config_fuzz.save(counts.findings[0], 15)
    assert saved.read_bytes() == counts.findings[0].data
    report = saved.with_suffix(".txt").read_text()
    assert report.startswith(f"seed 15 input {counts.findings[0].index}\nstanpkg validate ")
