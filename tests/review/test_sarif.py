"""``stanpkg validate --format sarif`` checked against the SARIF 2.1.0 schema (OASIS, the
file next to this one) with fastjsonschema, the project's one JSON Schema library: one
result per diagnostic, rule, level, message and location (the included file's own path for
a problem in an include), the rules described once in the driver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import fastjsonschema
import pytest

from stanpkg.cli import main
from stanpkg.plan.compile import compile_args
from stanpkg.plan.diagnostics import RULES
from stanpkg.review.findings import findings
from stanpkg.review.sarif import sarif_log
from tests.review.configs import write_problems, write_valid

SCHEMA = json.loads((Path(__file__).with_name("sarif-schema-2.1.0.json")).read_text())
# Draft 4, as the schema's own "$schema" says (fastjsonschema follows it).
VALIDATE = fastjsonschema.compile(SCHEMA, use_default=False)  # checks, never fills in


def validated(doc: dict[str, Any]) -> dict[str, Any]:
    VALIDATE(doc)
    return doc


def run_sarif(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = main(["validate", "--format", "sarif", *args])
    return status, validated(json.loads(capsys.readouterr().out))


def test_the_schema_is_the_standard_one() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert SCHEMA["properties"]["version"]["enum"] == ["2.1.0"]
    with pytest.raises(fastjsonschema.JsonSchemaValueException):  # it rejects non-SARIF
        VALIDATE({"version": "2.1.0", "runs": [{}]})


@pytest.mark.usefixtures("problems_here")
def test_one_result_per_diagnostic_with_rule_level_and_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = compile_args(["stan.conf", "-mm", "-1"], positional_config=True).diagnostics
    status, doc = run_sarif(["stan.conf", "-mm", "-1"], capsys)
    assert status == 1
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1
    run = doc["runs"][0]
    results = run["results"]
    assert len(results) == len(expected) == 4
    rules = run["tool"]["driver"]["rules"]
    ids = [rule["id"] for rule in rules]
    assert len(ids) == len(set(ids))  # described once
    for result, diag in zip(results, expected, strict=True):
        assert result["ruleId"] == diag.code and rules[result["ruleIndex"]]["id"] == diag.code
        assert rules[result["ruleIndex"]]["shortDescription"]["text"] == RULES[diag.code]
        assert result["level"] == diag.severity.value
        if diag.pos is not None:
            assert result["message"]["text"] == diag.message
            location = result["locations"][0]["physicalLocation"]
            assert location["artifactLocation"] == {"uri": diag.pos.file, "uriBaseId": "%SRCROOT%"}
            assert location["region"] == {"startLine": diag.pos.line, "startColumn": diag.pos.col}
        else:  # the flag's error: shown on the configuration file, naming the flag
            assert result["message"]["text"] == f"-mm: {diag.message}"
            location = result["locations"][0]["physicalLocation"]
            assert location == {"artifactLocation": {"uri": "stan.conf", "uriBaseId": "%SRCROOT%"}}
    by_file = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert by_file == {"stan.conf", "limits.conf"}  # the include's own path
    base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert unquote(urlsplit(base).path) == f"{tmp_path.resolve()}/"
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["tool"]["driver"]["name"] == "stanpkg"


def test_strict_makes_warnings_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = write_valid(tmp_path)
    conf.write_text(conf.read_text() + "max_msg: 3\n")
    status, doc = run_sarif([str(conf)], capsys)
    assert status == 0 and [r["level"] for r in doc["runs"][0]["results"]] == ["warning"]
    status, doc = run_sarif(["--strict", str(conf)], capsys)
    assert status == 1 and [r["level"] for r in doc["runs"][0]["results"]] == ["error"]


def test_absolute_paths_are_file_uris(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = write_problems(tmp_path)
    _status, doc = run_sarif([str(conf)], capsys)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in doc["runs"][0]["results"]
    }
    assert uris == {(tmp_path / "stan.conf").as_uri(), (tmp_path / "limits.conf").as_uri()}


def test_a_valid_configuration_has_no_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, doc = run_sarif([str(write_valid(tmp_path))], capsys)
    assert status == 0
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []


def test_several_files_make_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad, good = write_problems(tmp_path), write_valid(tmp_path)
    status, doc = run_sarif([str(good), str(bad)], capsys)
    assert status == 1 and len(doc["runs"]) == 1 and len(doc["runs"][0]["results"]) == 3


def test_paths_that_need_escaping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    odd = tmp_path / "dir with space#1"
    odd.mkdir()
    conf = odd / "stan.conf"
    conf.write_text("max_msg: 3\n")
    result = compile_args([str(conf.relative_to(tmp_path))], positional_config=True)
    doc = validated(sarif_log(findings(result.diagnostics, ""), cwd=str(tmp_path)))
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri["uri"] == "dir%20with%20space%231/stan.conf"
