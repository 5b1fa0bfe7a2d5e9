"""A flag that overrides a key of the configuration file does not hide that key's type
error: every value the files hold is type-checked before flags and environment apply.

The Go reference (v0.23.2) parses the file into its options first and refuses a value of
the wrong type there (``port: "abc"`` stops the start whatever ``-p`` says); only then
do the flags override what the file set. Ranges are checked on the merged options, so
a flag may still replace a value out of range."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.plan.diagnostics import Severity
from tests.plan.test_compile import compile_text, messages


@pytest.mark.parametrize(
    ("text", "flags", "expected"),
    [
        (
            'port: "abc"\n',
            ["-p", "4222"],
            'stan.conf:1:7: error: port must be an integer, got the string "abc"',
        ),
        (
            "streaming {\n  hb_fail_count: true\n}\n",
            ["-hbf", "3"],
            "stan.conf:2:18: error: hb_fail_count must be an integer, got the boolean true",
        ),
        (
            'streaming {\n  hb_interval: "soon"\n}\n',
            ["-hbi", "1s"],
            "stan.conf:2:16: error: hb_interval: ",
        ),
        (
            "streaming {\n  store_limits { max_msgs: 10.5 }\n}\n",
            ["-mm", "100"],
            "stan.conf:2:28: error: max_msgs must be an integer, got the number 10.5",
        ),
    ],
)
def test_a_flag_does_not_hide_the_files_type_error(
    tmp_path: Path, text: str, flags: list[str], expected: str
) -> None:
    result = compile_text(tmp_path, text, *flags)
    assert result.plan is None
    errors = messages(result, Severity.ERROR)
    assert len(errors) == 1, errors
    assert errors[0].startswith(str(tmp_path / expected)), errors[0]


def test_without_the_flag_the_error_is_the_same(tmp_path: Path) -> None:
    with_flag = messages(compile_text(tmp_path, 'port: "abc"\n', "-p", "4222"))
    without = messages(compile_text(tmp_path, 'port: "abc"\n'))
    assert with_flag == without


def test_a_flag_still_replaces_a_value_out_of_range(tmp_path: Path) -> None:
    # As the reference: the range is the merged option's; the flag's value is in range.
    result = compile_text(tmp_path, "port: 70000\n", "-p", "4222")
    assert result.plan is not None and result.plan.nats_server.port == 4222
