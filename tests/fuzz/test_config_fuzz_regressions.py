"""Inputs that once ended in a traceback of ``stanpkg validate``, run through the fuzzer's
own validate step (compile, render the result, render the embedded nats-server's
configuration): each ends in diagnostics now."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fuzz.config_fuzz import validate

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
