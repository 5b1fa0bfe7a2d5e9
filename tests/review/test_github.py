"""``stanpkg validate --format github``: every line is a workflow command GitHub's runner
reads as an annotation of the right file, line and column, whatever the message and the
file name hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.cli import main
from stanpkg.conf import Position
from stanpkg.plan.compile import compile_args
from stanpkg.plan.diagnostics import RULES, error, warning
from stanpkg.review.findings import Finding
from stanpkg.review.github import escape_data, escape_property, workflow_command
from tests.review.configs import write_valid
from tests.review.workflow_commands import NotACommand, parse


def test_the_reader_follows_the_documented_syntax() -> None:
    # GitHub's documented examples
    assert parse("::error file=app.js,line=1,col=5,endColumn=7::Missing semicolon").properties == {
        "file": "app.js",
        "line": "1",
        "col": "5",
        "endColumn": "7",
    }
    assert parse("::warning::no properties").message == "no properties"
    assert parse("::error title=a%3Ab%2Cc::50%25%0Anext").properties["title"] == "a:b,c"
    for bad in ("error::x", "::error file=a,line=x::m", "::error file=a:b::m", "::debug::m"):
        with pytest.raises(NotACommand):
            parse(bad)


@pytest.mark.usefixtures("problems_here")
def test_each_diagnostic_is_one_annotation(capsys: pytest.CaptureFixture[str]) -> None:
    expected = compile_args(["stan.conf", "-mm", "-1"], positional_config=True).diagnostics
    assert main(["validate", "--format", "github", "stan.conf", "-mm", "-1"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(expected) == 4
    for line, diag in zip(lines, expected, strict=True):
        command = parse(line)
        assert command.name == diag.severity.value
        assert command.properties["title"] == f"stanpkg {diag.code}: {RULES[diag.code]}"
        if diag.pos is not None:
            assert command.message == diag.message
            assert command.properties["file"] == diag.pos.file
            assert command.properties["line"] == str(diag.pos.line)
            assert command.properties["col"] == str(diag.pos.col)
        else:
            assert command.message == f"-mm: {diag.message}"
            assert command.properties["file"] == "stan.conf" and "line" not in command.properties
    assert {parse(line).properties["file"] for line in lines} == {"stan.conf", "limits.conf"}


def test_strict_and_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = write_valid(tmp_path)
    assert main(["validate", "--format", "github", str(conf)]) == 0
    assert capsys.readouterr().out == ""
    conf.write_text(conf.read_text() + "max_msg: 3\n")
    assert main(["validate", "--format", "github", str(conf)]) == 0
    assert parse(capsys.readouterr().out.strip()).name == "warning"
    assert main(["validate", "--format", "github", "--strict", str(conf)]) == 1
    assert parse(capsys.readouterr().out.strip()).name == "error"


@pytest.mark.parametrize(
    ("file", "message"),
    [
        ("a,b:c.conf", "plain"),
        ("100%.conf", "50% of 10,000: done\r\nnext line"),
        ("dir/x.conf", "ends with a colon:"),
        ("x.conf", "%25 written literally, and %0A too"),
        ("x.conf", "::error file=evil::injected"),
    ],
)
def test_escaping_round_trips(file: str, message: str) -> None:
    for diag in (error(message, Position(file, 3, 7), code="range"), warning(message, where="-mm")):
        line = workflow_command(Finding(diag, file))
        assert "\n" not in line and "\r" not in line
        command = parse(line)
        assert command.properties["file"] == file
        expected = message if diag.pos is not None else f"-mm: {message}"
        assert command.message == expected


def test_the_escapes_are_the_documented_ones() -> None:
    assert escape_data("%\r\n:,") == "%25%0D%0A:,"
    assert escape_property("%\r\n:,") == "%25%0D%0A%3A%2C"
