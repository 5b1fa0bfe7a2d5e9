"""JSON Schema of the normalised configuration, derived from the options table.

The compiler checks every normalised configuration against it with ``fastjsonschema`` (types,
ranges, allowed values); ``schemas/stan.schema.json`` is this schema written out, and a
test keeps that file up to date.
"""

from __future__ import annotations

import json
from typing import Any

from stanpkg.plan.options import OPTIONS, SECTION_KEYS, SECTION_TITLES, Kind, Option

SCHEMA_ID = "https://stanpkg.dev/schemas/stan.schema.json"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def option_schema(opt: Option) -> dict[str, Any]:
    prop: dict[str, Any] = {"description": opt.description}
    if opt.default_doc:
        prop["x-default"] = opt.default_doc  # the literal default stands for this rule
    match opt.kind:
        case Kind.INT | Kind.SIZE | Kind.DURATION:
            prop["type"] = "integer"
            prop["minimum"] = opt.minimum if opt.minimum is not None else INT64_MIN
            prop["maximum"] = opt.maximum if opt.maximum is not None else INT64_MAX
            if opt.kind is Kind.DURATION:
                prop["x-unit"] = "nanoseconds"
            elif opt.kind is Kind.SIZE:
                prop["x-unit"] = "bytes"
        case Kind.BOOL:
            prop["type"] = "boolean"
        case Kind.STRINGS:
            prop["type"] = "array"
            prop["items"] = {"type": "string"}
        case _:
            prop["type"] = "string"
            if opt.choices:
                # Values are normalised to the choices' case before validation.
                prop["enum"] = [*opt.choices, *([""] if opt.default == "" else [])]
    default = list(opt.default) if isinstance(opt.default, tuple) else opt.default
    if not opt.secret:
        prop["default"] = default
    else:
        prop["writeOnly"] = True
    if opt.keys:
        prop["x-config-keys"] = list(opt.keys)
    if opt.flags:
        prop["x-flags"] = list(opt.flags)
    if opt.env:
        prop["x-env"] = opt.env
    return prop


def _section_object(section: str) -> dict[str, Any]:
    props = {o.name: option_schema(o) for o in OPTIONS if o.section == section}
    return {
        "type": "object",
        "description": SECTION_TITLES[section],
        "properties": props,
        "additionalProperties": False,
    }


def build_schema() -> dict[str, Any]:
    root = _section_object("")
    root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    root["$id"] = SCHEMA_ID
    root["title"] = "stanpkg normalised streaming server configuration"
    for section in SECTION_KEYS:
        if section:
            root["properties"][section] = _section_object(section)
    per_channel = {o.name: option_schema(o) for o in OPTIONS if o.per_channel}
    root["properties"]["store_limits"]["properties"]["channels"] = {
        "type": "object",
        "description": "Per-channel limits by channel name (wildcards allowed); an absent "
        "limit is inherited, 0 means unlimited",
        "additionalProperties": {
            "type": "object",
            "properties": per_channel,
            "additionalProperties": False,
        },
    }
    # Keep the schema a stable, reviewable file: sorted keys at every level.
    result: dict[str, Any] = json.loads(json.dumps(root, sort_keys=True))
    return result


def schema_text() -> str:
    return json.dumps(build_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
