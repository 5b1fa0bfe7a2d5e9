"""Inputs that once ended in a traceback of ``stanpkg validate``, run through the fuzzer's
own validate step (compile, render the result, render the embedded nats-server's
configuration): each ends in diagnostics now."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.plan.compile import compile_args
from tests.fuzz.config_fuzz import validate
from tests.fuzz.config_inputs import ENVIRONMENT

# Inputs the fuzzer saved (tests/fuzz/crashes/), kept with the command line they ran with.
SAVED = Path(__file__).resolve().parent / "config_regressions"
# file name: (flags, diagnostic expected)
SAVED_RUNS = {
    # max_msgs: 5000.00 passed the schema (JSON Schema counts 5000.0 as an integer) and
    # ended in an assertion building the plan's limits.
    "fractional-max-msgs.conf": (
        ["-c"],
        "max_msgs must be an integer, got the number 5000.0",
    ),
}

# (flags, configuration text)
FOUND = [
    # A --cluster URL whose port Python's URL parser refuses: the embedded server's
    # configuration was rendered from it (found planting secrets, then by the fuzzer's flags).
    (["--cluster", "nats://u:p@127.0.0.1:-1"], ""),
    (["--cluster", "nats://127.0.0.1:99999"], ""),
    (["--cluster", "nats://[::1"], ""),
    (["--cluster=nats://h:x", "--routes", "nats://a:1"], "streaming { store: memory }\n"),
]


@pytest.mark.parametrize(("flags", "text"), FOUND)
def test_found_input_ends_in_diagnostics(flags: list[str], text: str, tmp_path: Path) -> None:
    conf = tmp_path / "fuzz.conf"
    conf.write_text(text, encoding="utf-8")
    assert validate([*flags, "-sc", str(conf)]) is False


@pytest.mark.parametrize("name", sorted(SAVED_RUNS))
def test_saved_input_ends_in_diagnostics(name: str) -> None:
    flags, expected = SAVED_RUNS[name]
    argv = [*flags, str(SAVED / name)]
    assert validate(argv) is False
    result = compile_args(argv, ENVIRONMENT)
    assert any(expected in str(d) for d in result.diagnostics), result.diagnostics


def test_every_saved_input_is_run() -> None:
    assert sorted(p.name for p in SAVED.iterdir()) == sorted(SAVED_RUNS)
