"""nats-server's errors about NATS options of a -c file name the user's file and line,
never the configuration stanpkg generates for the embedded server."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.cli import main
from stanpkg.conf import parse_string, render_with_positions

# Our compiler passes these through; nats-server rejects them (a value it does not know
# for JetStream, an unknown key inside a passed-through block).
NATS_CONF = """port: -1
streaming {
  store: memory
}
jetstream: "maybe"
cluster {
  listen: "127.0.0.1:-1"
  bogus_key: 5
}
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_nats_option_errors_point_at_the_users_file(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    conf = tmp_path / "nats.conf"
    conf.write_text(NATS_CONF)
    assert main([command, "-c", str(conf)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{conf}:5:1: error: the NATS server rejects this option: ")
    assert (
        err[1]
        == f'{conf}:8:3: error: the NATS server rejects this option: unknown field "bogus_key"'
    )
    assert not any("embedded-nats.conf" in line or "nats-server.conf" in line for line in err)


def test_each_rendered_line_knows_where_it_was_written() -> None:
    text = "a: 1\nb {\n  c: [\n    { d: 2 }\n    x\n  ]\n}\ne: [1, 2]\n"
    rendered, marks = render_with_positions(parse_string(text, "f.conf"))
    lines = rendered.splitlines()
    assert len(lines) == len(marks)
    shown = [(line.strip(), (m.line, m.col)) for line, m in zip(lines, marks, strict=True)]
    assert shown == [
        ("a: 1", (1, 1)),
        ("b {", (2, 1)),
        ("c: [", (3, 3)),
        ("{", (4, 5)),
        ("d: 2", (4, 7)),
        ("}", (4, 5)),
        ('"x"', (5, 5)),
        ("]", (3, 3)),
        ("}", (2, 1)),
        ("e: [1, 2]", (8, 1)),
    ]


def test_a_lexer_error_of_nats_server_names_the_users_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nats-server's lexer names a line only ("Parse error on line 9"), of the generated
    file: it is shown in the user's file (nats-server refuses a number closing an array
    before a line end, which our parser accepts)."""
    (tmp_path / "stan.conf").write_text("")
    conf = tmp_path / "nats.conf"
    conf.write_text("port: -1\nauthorization {\n  users: [1]\n}\n")
    assert main(["validate", "-sc", str(tmp_path / "stan.conf"), "-c", str(conf)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{conf}:2:1: error: the NATS server rejects this option: ")
    assert "array terminator" in err[0]
