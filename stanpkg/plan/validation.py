"""Type, range and allowed-value checks of the normalised configuration via its JSON Schema.

fastjsonschema compiles the schema to Python code (~12x faster than an interpreting
validator on configurations with 100k channels), but it stops at the first problem. So
the whole configuration is checked once, and only when that fails does the check descend
into the failing parts, section by section and channel by channel, to collect every
problem with its path. This module turns each one into a diagnostic at the position of
the offending value, in the words of the options table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache, cached_property
from typing import Any

import fastjsonschema

from stanpkg.plan.context import Context, Path, option_for
from stanpkg.plan.gotime import format_duration
from stanpkg.plan.options import Kind, Option
from stanpkg.plan.schema import build_schema
from stanpkg.plan.sql_drivers import missing_driver

_EXPECTED = {
    "integer": "an integer",
    "boolean": "a boolean (true/false, yes/no, on/off)",
    "string": "a string",
    "array": "an array",
    "object": "a map",
}


@dataclass(frozen=True)
class SchemaError:
    """One value the schema rejects: the keyword (``rule``) it fails and that keyword's
    value in the schema (``expected``)."""

    path: Path
    rule: str
    expected: object
    value: object


class _Node:
    """A schema and its sub-schemas, each compiled only when first needed (the root on
    every run; the others only on the way down to a problem)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    @cached_property
    def check(self) -> Callable[[object], object]:
        check: Callable[[object], object] = fastjsonschema.compile(
            self.schema,
            use_default=False,  # never fill the data in
        )
        return check

    @cached_property
    def properties(self) -> dict[str, _Node]:
        return {k: _Node(v) for k, v in self.schema.get("properties", {}).items()}

    @cached_property
    def additional(self) -> _Node | None:
        extra = self.schema.get("additionalProperties")
        return _Node(extra) if isinstance(extra, dict) else None

    @cached_property
    def items(self) -> _Node | None:
        items = self.schema.get("items")
        return _Node(items) if isinstance(items, dict) else None


@cache
def _root() -> _Node:
    return _Node(build_schema())


def schema_errors(config: object) -> list[SchemaError]:
    """Every schema violation in ``config`` (none: the one fast check passes).

    A map is checked key by key: compiling the whole schema costs ~90 ms, the sub-schemas
    of the few keys a configuration sets a few, and every server start pays it."""
    root = _root()
    if isinstance(config, dict):
        return list(_descend(root, config, ()))
    return list(_walk(root, config, ()))


def _walk(node: _Node, data: object, path: Path) -> Iterator[SchemaError]:
    try:
        node.check(data)
        return
    except fastjsonschema.JsonSchemaValueException as exc:
        first = exc
    found = list(_descend(node, data, path))
    # A rule of the object itself (none in the schema today) is reported where it failed.
    yield from found or [SchemaError(path, str(first.rule), first.rule_definition, first.value)]


def _descend(node: _Node, data: object, path: Path) -> Iterator[SchemaError]:
    """The problems inside a map or array of the right type (which itself passed its own
    ``type`` rule: fastjsonschema reports the deepest failing rule, not the node's)."""
    if isinstance(data, dict) and "properties" in node.schema:
        unexpected = []
        for key, value in data.items():
            child = node.properties.get(key) or node.additional
            if child is None:
                unexpected.append(key)
            else:
                yield from _walk(child, value, (*path, str(key)))
        if unexpected:
            yield SchemaError(path, "additionalProperties", unexpected, data)
        return
    if isinstance(data, list) and node.items is not None:
        for index, item in enumerate(data):
            yield from _walk(node.items, item, (*path, str(index)))
        return
    if isinstance(data, dict) and node.additional is not None:
        for key, value in data.items():  # a map of like values (the channels)
            yield from _walk(node.additional, value, (*path, str(key)))


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


def _message(err: SchemaError, path: Path, opt: Option | None) -> str:
    name = path[-1] if path else "configuration"
    channel = f'channel "{path[2]}": ' if len(path) == 4 and path[1] == "channels" else ""
    if err.rule == "type":
        expected = _EXPECTED.get(str(err.expected), str(err.expected))
        if opt is not None and opt.kind is Kind.SIZE:
            expected = "a size (an integer, optionally with a suffix such as 10MB or 1GiB)"
        secret = opt is not None and opt.secret
        got = describe_kind(err.value) if secret else describe_value(err.value)
        return f"{channel}{name} must be {expected}, got {got}"
    if err.rule in ("minimum", "maximum") and opt is not None:
        text = (
            opt.range_error.format(value=_shown(opt, err.value))
            if opt.range_error
            else f"{name} is out of range ({_shown(opt, err.value)})"
        )
        return f"{channel}{text}"
    if err.rule == "enum" and opt is not None:
        allowed = ", ".join(opt.choices)
        return f'{name}: "{err.value}" is not supported (expected one of: {allowed})'
    if err.rule == "additionalProperties" and isinstance(err.expected, list):
        extras = ", ".join(repr(key) for key in err.expected)
        verb = "was" if len(err.expected) == 1 else "were"
        return f"{name}: Additional properties are not allowed ({extras} {verb} unexpected)"
    return f"{channel}{name}: {_generic(err)}"


def _generic(err: SchemaError) -> str:
    """The rule in a validator's usual words (rules the options table has no text for)."""
    match err.rule:
        case "minimum":
            return f"{err.value!r} is less than the minimum of {err.expected}"
        case "maximum":
            return f"{err.value!r} is greater than the maximum of {err.expected}"
        case "enum":
            return f"{err.value!r} is not one of {err.expected!r}"
        case _:
            return f"{err.value!r} does not satisfy {err.rule}: {err.expected!r}"


def check_file_types(ctx: Context) -> None:
    """The types of the values the configuration files hold, checked before anything
    overrides them; a wrong one is reported at its position and dropped. Ranges and
    allowed values are checked later, on the merged configuration (:func:`check_schema`),
    as the reference checks them once flags are applied."""
    errors = [err for err in schema_errors(ctx.config) if err.rule == "type"]
    for err in sorted(errors, key=lambda e: _order(ctx, e.path)):
        option_path = _option_path(err.path)
        ctx.error(option_path, _message(err, option_path, option_for(option_path)), _code(err))
    for err in errors:
        ctx.reject(_option_path(err.path))


def check_schema(ctx: Context) -> None:
    """Add a diagnostic for every schema violation and drop the offending value."""
    errors = schema_errors(ctx.config)
    for err in sorted(errors, key=lambda e: _order(ctx, e.path)):
        option_path = _option_path(err.path)
        opt = option_for(option_path)
        ctx.error(option_path, _message(err, option_path, opt), _code(err))
    for err in errors:
        ctx.reject(_option_path(err.path))
    _check_sql_driver(ctx)


def _check_sql_driver(ctx: Context) -> None:
    """An allowed driver must also be installed: its module is an optional dependency."""
    driver = ctx.value(("sql_options", "driver"))
    if str(ctx.value(("store_type",)) or "").upper() != "SQL" or not isinstance(driver, str):
        return
    problem = missing_driver(driver)
    if problem:
        ctx.error(("sql_options", "driver"), problem, "sql-driver")


def _option_path(path: Path) -> Path:
    return path[:-1] if path and path[-1].isdigit() else path  # array items


def _code(err: SchemaError) -> str:
    return {"type": "type", "minimum": "range", "maximum": "range", "enum": "value"}.get(
        err.rule, "schema"
    )


def _order(ctx: Context, path: Path) -> tuple[Any, ...]:
    pos = ctx.positions.get(path)
    return (0, pos.file, pos.line, pos.col) if pos else (1, "", 0, 0)
