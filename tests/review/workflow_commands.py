"""A reader of GitHub Actions workflow commands written from GitHub's documentation
("Workflow commands for GitHub Actions": ``::error file={name},line={line},col={col},
title={title}::{message}``, likewise ``::warning`` and ``::notice``) and the runner's
parser (actions/runner ``ActionCommand.TryParseV2``): the command ends at the second
``::``; its properties are comma-separated ``name=value`` pairs; values are unescaped
``%0D`` ``%0A`` ``%3A`` ``%2C`` then ``%25``, the message ``%0D`` ``%0A`` then ``%25``.
It is strict where the runner is lenient, so that what it accepts, the runner reads the
same way."""

from __future__ import annotations

import re
from dataclasses import dataclass

ANNOTATIONS = ("error", "warning", "notice")
PROPERTIES = ("title", "file", "col", "endColumn", "line", "endLine")
NUMERIC = ("col", "endColumn", "line", "endLine")
_DATA = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
_PROPERTY = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))


class NotACommand(ValueError):
    pass


@dataclass(frozen=True)
class Command:
    name: str
    properties: dict[str, str]
    message: str


def _unescape(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for escaped, plain in table:
        text = text.replace(escaped, plain)
    return text


def parse(line: str) -> Command:
    if "\n" in line or "\r" in line:
        raise NotACommand("a command is one line")
    if not line.startswith("::"):
        raise NotACommand("a command starts with ::")
    end = line.find("::", 2)
    if end < 0:
        raise NotACommand("no :: before the message")
    info, data = line[2:end], line[end + 2 :]
    name, _, props = info.partition(" ")
    if name not in ANNOTATIONS:
        raise NotACommand(f"not an annotation command: {name!r}")
    properties: dict[str, str] = {}
    for pair in props.split(",") if props else []:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise NotACommand(f"malformed property {pair!r}")
        if key not in PROPERTIES:
            raise NotACommand(f"undocumented property {key!r}")
        if ":" in value:
            raise NotACommand(f"unescaped ':' in property {key!r}")
        if key in properties:
            raise NotACommand(f"repeated property {key!r}")
        if key in NUMERIC and not re.fullmatch(r"[1-9][0-9]*", value):
            raise NotACommand(f"{key} must be a positive number, got {value!r}")
        properties[key] = _unescape(value, _PROPERTY)
    for raw in (info, data):
        if re.search(r"%(?!25|0D|0A|3A|2C)", raw):
            raise NotACommand("a % that is not an escape")
    return Command(name, properties, _unescape(data, _DATA))
