"""Type, range and allowed-value checks of the normalised configuration via its JSON Schema.

jsonschema finds the problems; this module turns each one into a diagnostic at the
position of the offending value, in the words of the options table.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from stanpkg.plan.context import Context, Path, option_for
from stanpkg.plan.gotime import format_duration
from stanpkg.plan.options import Kind, Option
from stanpkg.plan.schema import build_schema

_EXPECTED = {
    "integer": "an integer",
    "boolean": "a boolean (true/false, yes/no, on/off)",
    "string": "a string",
    "array": "an array",
    "object": "a map",
}


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(build_schema())


@cache
def _fast_check() -> Any:
    # fastjsonschema compiles the schema to Python code: ~20x faster on configurations with
    # 100k channels, but it stops at the first problem. So it only answers "all good?";
    # jsonschema then collects every problem with its path when something is wrong.
    return fastjsonschema.compile(build_schema(), use_default=False)  # never fill the data in


def _conforms(config: dict[str, object]) -> bool:
    try:
        _fast_check()(config)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def describe_value(value: object) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, datetime):
        return f"the date {value.isoformat()}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a map"
    return repr(value)


def _shown(opt: Option, value: object) -> str:
    if opt.kind is Kind.DURATION and isinstance(value, int):
        return format_duration(value)
    return str(value)


def describe_kind(value: object) -> str:
    """A value's type only: what a message may say of a secret."""
    text = describe_value(value)
    for kind in ("boolean", "number", "string", "date"):
        if text.startswith(f"the {kind} "):
            return f"a {kind}"
    return text


def _message(err: ValidationError, path: Path, opt: Option | None) -> str:
    name = path[-1] if path else "configuration"
    channel = f'channel "{path[2]}": ' if len(path) == 4 and path[1] == "channels" else ""
    if err.validator == "type":
        expected = _EXPECTED.get(str(err.validator_value), str(err.validator_value))
        if opt is not None and opt.kind is Kind.SIZE:
            expected = "a size (an integer, optionally with a suffix such as 10MB or 1GiB)"
        secret = opt is not None and opt.secret
        got = describe_kind(err.instance) if secret else describe_value(err.instance)
        return f"{channel}{name} must be {expected}, got {got}"
    if err.validator in ("minimum", "maximum") and opt is not None:
        text = (
            opt.range_error.format(value=_shown(opt, err.instance))
            if opt.range_error
            else f"{name} is out of range ({_shown(opt, err.instance)})"
        )
        return f"{channel}{text}"
    if err.validator == "enum" and opt is not None:
        allowed = ", ".join(opt.choices)
        return f'{name}: "{err.instance}" is not supported (expected one of: {allowed})'
    if err.validator == "additionalProperties":
        return f"{name}: {err.message}"
    return f"{channel}{name}: {err.message}"


def check_schema(ctx: Context) -> None:
    """Add a diagnostic for every schema violation and drop the offending value."""
    if _conforms(ctx.config):
        return
    errors: list[tuple[Path, ValidationError]] = []
    for err in _validator().iter_errors(ctx.config):
        errors.append((tuple(str(p) for p in err.absolute_path), err))
    for path, err in sorted(errors, key=lambda pe: _order(ctx, pe[0])):
        option_path = path[:-1] if path and path[-1].isdigit() else path  # array items
        opt = option_for(option_path)
        ctx.error(option_path, _message(err, option_path, opt), _code(err))
    for path, _ in errors:
        ctx.reject(path[:-1] if path and path[-1].isdigit() else path)


def _code(err: ValidationError) -> str:
    return {"type": "type", "minimum": "range", "maximum": "range", "enum": "value"}.get(
        str(err.validator), "schema"
    )


def _order(ctx: Context, path: Path) -> tuple[Any, ...]:
    pos = ctx.positions.get(path)
    return (0, pos.file, pos.line, pos.col) if pos else (1, "", 0, 0)
