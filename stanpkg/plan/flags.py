"""Command-line flags with Go ``flag`` package syntax, derived from the options table.

Go's syntax (``-mm 5``, ``--max_msgs=5``, bool flags as ``-SD`` or ``-SD=false``, parsing
stops at the first non-flag word) is what existing unit files and scripts use, and argparse
cannot express it (single-dash long names, bools that never take a separate value), so the
parser is written here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stanpkg.conf import ConfError, parse_value
from stanpkg.conf import Kind as NodeKind
from stanpkg.plan.gotime import DurationError, parse_duration
from stanpkg.plan.options import COMPOUND_FLAGS, OPTIONS, Kind, Option

# Flags that are not options: they choose files or actions.
SPECIAL_FLAGS: dict[str, str] = {
    "sc": "stan_config",
    "stan_config": "stan_config",
    "c": "config",
    "config": "config",
    "sl": "signal",
    "signal": "signal",
    "h": "help",
    "help": "help",
    "v": "version",
    "version": "version",
    "help_tls": "help_tls",
}
_SPECIAL_BOOL = {"help", "version", "help_tls"}

_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_GO_OCTAL = re.compile(r"[+-]?0[0-7]+")


class UsageError(ValueError):
    """A command-line error: the caller prints it on one line and exits with status 2."""


@dataclass(frozen=True)
class FlagValue:
    value: object
    flag: str  # as written, without the value: "-mm", "--max_msgs"


@dataclass
class ParsedFlags:
    values: dict[str, FlagValue] = field(default_factory=dict)  # option path -> value
    stan_config: str = ""
    config: str = ""
    signal: str = ""
    help: bool = False
    version: bool = False
    help_tls: bool = False
    positional: list[str] = field(default_factory=list)


def _flag_names() -> dict[str, Option]:
    names: dict[str, Option] = {}
    for opt in OPTIONS:
        for flag in opt.flags:
            names[flag.lstrip("-")] = opt
    return names


FLAG_NAMES = _flag_names()


def parse_go_bool(text: str) -> bool:
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise ValueError(text)


def parse_go_int(text: str) -> int:
    """strconv.ParseInt(s, 0, 64): decimal, 0x/0o/0b prefixes and a leading-0 octal."""
    value = int(text, 8) if _GO_OCTAL.fullmatch(text) else int(text, 0)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value


def convert_flag_value(opt: Option, text: str, flag: str) -> object:
    """Turn a flag's text into the option's value; UsageError with Go's wording if not."""
    try:
        match opt.kind:
            case Kind.BOOL:
                return parse_go_bool(text)
            case Kind.INT:
                return parse_go_int(text)
            case Kind.DURATION:
                return parse_duration(text)
            case Kind.SIZE:
                node = parse_value(text, filename=flag)
                if node.kind is not NodeKind.INT:
                    raise UsageError(
                        f"invalid value {text!r} for flag {flag}: expected a size "
                        "such as 1024, 10MB or 1GiB"
                    )
                assert isinstance(node.value, int)
                return node.value
            case Kind.STRINGS:
                return [p.strip() for p in text.split(",") if p.strip()]
            case _:
                return text
    except ConfError as exc:
        raise UsageError(f"invalid value {text!r} for flag {flag}: {exc.message}") from None
    except DurationError as exc:
        raise UsageError(f"invalid value {text!r} for flag {flag}: {exc}") from None
    except ValueError:
        raise UsageError(f"invalid value {text!r} for flag {flag}: parse error") from None


def parse_flags(argv: list[str], *, interspersed: bool = False) -> ParsedFlags:
    """Parse like Go's flag package; raises UsageError on the first problem.

    Go stops at the first word that is not a flag; with ``interspersed`` such words are
    collected and parsing goes on (``stanpkg validate stan.conf --strict``).
    """
    out = ParsedFlags()
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            out.positional.extend(argv[i:])
            break
        if len(arg) < 2 or not arg.startswith("-"):
            if interspersed:
                out.positional.append(arg)
                continue
            out.positional.extend(argv[i - 1 :])
            break
        written, has_value, text = arg.partition("=")
        name = written[2:] if written.startswith("--") else written[1:]
        if not name or name.startswith("-") or name.startswith("="):
            raise UsageError(f"bad flag syntax: {arg}")
        if name in SPECIAL_FLAGS or name in FLAG_NAMES or f"-{name}" in COMPOUND_FLAGS:
            pass
        else:
            raise UsageError(f"flag provided but not defined: {written}")
        is_bool = (
            f"-{name}" in COMPOUND_FLAGS
            or SPECIAL_FLAGS.get(name) in _SPECIAL_BOOL
            or (name in FLAG_NAMES and FLAG_NAMES[name].kind is Kind.BOOL)
        )
        if not has_value and not is_bool:
            if i >= len(argv):
                raise UsageError(f"flag needs an argument: {written}")
            text = argv[i]
            i += 1
        if f"-{name}" in COMPOUND_FLAGS:
            value = parse_bool_flag(text if has_value else "true", written)
            for path in COMPOUND_FLAGS[f"-{name}"]:
                out.values[path] = FlagValue(value, written)
        elif name in SPECIAL_FLAGS:
            target = SPECIAL_FLAGS[name]
            if target in _SPECIAL_BOOL:
                setattr(out, target, parse_bool_flag(text if has_value else "true", written))
            else:
                setattr(out, target, text)
        else:
            opt = FLAG_NAMES[name]
            raw = text if (has_value or not is_bool) else "true"
            out.values[opt.path] = FlagValue(convert_flag_value(opt, raw, written), written)
    return out


def parse_bool_flag(text: str, flag: str) -> bool:
    try:
        return parse_go_bool(text)
    except ValueError:
        raise UsageError(f"invalid boolean value {text!r} for flag {flag}: parse error") from None
