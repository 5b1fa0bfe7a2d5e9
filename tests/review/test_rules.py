"""Every diagnostic code stanpkg writes is described once, in plan/diagnostics.py's RULES
(the rules of SARIF's driver, the titles of annotations), and every rule there is used."""

from __future__ import annotations

import ast
from pathlib import Path

from stanpkg.plan.diagnostics import RULES
from stanpkg.plan.validation import SchemaError, _code

PACKAGE = Path(__file__).resolve().parents[2] / "stanpkg"
# The calls that make a diagnostic, and where their code is when passed by position.
CODE_ARGUMENT = {"error": None, "warning": None, "Diagnostic": 4, "_at": 1}
CONTEXT_ARGUMENT = 2  # ctx.error(path, message, code)


def _code_node(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "code":
            return keyword.value
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("error", "warning"):
        position: int | None = CONTEXT_ARGUMENT
    elif isinstance(func, ast.Name) and func.id in CODE_ARGUMENT:
        position = CODE_ARGUMENT[func.id]
    else:
        return None
    return call.args[position] if position is not None and len(call.args) > position else None


def written_codes() -> set[str]:
    codes = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                code = _code_node(node)
                if isinstance(code, ast.Constant) and isinstance(code.value, str):
                    codes.add(code.value)
    return codes


def schema_codes() -> set[str]:
    rules = ("type", "minimum", "maximum", "enum", "additionalProperties")
    return {_code(SchemaError((), rule, None, None)) for rule in rules}


def test_every_code_written_is_a_rule() -> None:
    codes = written_codes() | schema_codes()
    assert codes - set(RULES) == set()
    assert {"unknown-key", "syntax", "range", "live-messages", "nats"} <= codes


def test_every_rule_is_written_somewhere() -> None:
    assert set(RULES) - (written_codes() | schema_codes()) == set()
