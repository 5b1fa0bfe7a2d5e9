"""Inputs of the configuration fuzzer: mutated seed files and generated NATS configuration.

Every input is a pure function of (seed, index), so a campaign can be split among
workers by index ranges and any input found again from its index alone.

* Mutations of the seed corpus (``../shared/conformance`` and ``config_examples/``):
  byte flips, inserted and deleted bytes, tokens deleted, duplicated, swapped or
  replaced by a token of the language, splices of two seeds; one to four stacked.
* Generation: random maps, arrays and scalars of the NATS configuration language, with
  the keys of the options table and of nats-server, variables, includes, comments, every
  separator and string form.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

from stanpkg.plan.nats_keys import NATS_KEY_INDEX
from stanpkg.plan.options import CHANNELS_KEYS, OPTIONS, SECTION_KEYS, Kind, Option

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT.parent / "shared" / "conformance"

# Files the inputs may include, written beside every input (see write_include_files).
INCLUDE_FILES: dict[str, str] = {
    "inc_limits.conf": "max_msgs: 10\nmax_bytes: 1MB\n",
    "inc_store.conf": "store: file\ndir: /tmp/x\n",
    "inc_bad.conf": 'max_msgs: "ten"\n{ [',
    "inc_self.conf": 'include "inc_self.conf"\n',
    "inc_empty.conf": "",
}


def write_include_files(directory: Path) -> None:
    for name, text in INCLUDE_FILES.items():
        (directory / name).write_text(text, encoding="utf-8")
    sub = directory / "inc"
    sub.mkdir(exist_ok=True)
    if (CONFORMANCE / "inc").is_dir():  # the conformance cases' own includes
        for path in (CONFORMANCE / "inc").iterdir():
            if path.is_file():
                (sub / path.name).write_bytes(path.read_bytes())


def load_seeds() -> list[bytes]:
    paths = sorted(CONFORMANCE.glob("*.conf")) + sorted((ROOT / "config_examples").glob("*.conf"))
    seeds = [p.read_bytes() for p in paths]
    return [s for s in seeds if s] or [b"port: 4222\n"]


_OPTION_BY_KEY: dict[str, Option] = {k: o for o in OPTIONS for k in o.keys}
_SECTION_BY_KEY: dict[str, str] = {k: s for s, keys in SECTION_KEYS.items() for k in keys}

_KEYS = sorted(
    {k for o in OPTIONS for k in o.keys}
    | {k for keys in SECTION_KEYS.values() for k in keys}
    | set(CHANNELS_KEYS)
    | set(NATS_KEY_INDEX)
    | {"streaming", "listen", "http", "https", "include"}
)

# Tokens of the language, good and bad, inserted by mutations and used by generation.
_TOKENS = [
    *("{", "}", "[", "]", ":", "=", ",", ";", "\n", " ", "\t", "#", "//", "$", "'", '"'),
    *("(", ")", "\\", "\\x", "\\u00e9", "\\", "\r\n", "\x00", "\x7f", "\ufeff", "é", "\ud7ff"),
    *("0", "-1", "1KB", "1GiB", "9223372036854775807", "99999999999999999999KB", "1.5"),
    *("1e400", "-0", "0x10", "true", "yes", "off", "nil", "1h30m", '"1h"', '"-5s"', '"1.5ms"'),
    *("2016-05-04T18:53:41Z", "$X", "$missing", "$max_msgs", "${X}", 'include "inc_self.conf"'),
    *('include "inc_limits.conf"', 'include "nope.conf"', "include", '"a.b.>"', '"*"', '">"'),
    *('"foo..bar"', "streaming {", "channels {", "store_limits {", "'''", '"""'),
]

_INTERESTING_BYTES = b"{}[]:=,;\"'$#/\\()\n\r\t 0123456789-.eE>*_"


def _tokenise(text: bytes) -> list[bytes]:
    return re.findall(rb'\s+|[{}\[\]:=,;]|"[^"\n]*"|\'[^\'\n]*\'|[^\s{}\[\]:=,;]+', text)


def _flip(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    i = rng.randrange(len(data))
    return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]


def _insert_byte(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    i = rng.randrange(len(data) + 1)
    byte = rng.choice(_INTERESTING_BYTES) if rng.random() < 0.8 else rng.randrange(256)
    return data[:i] + bytes([byte]) + data[i:]


def _delete_bytes(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    if not data:
        return data
    i = rng.randrange(len(data))
    return data[:i] + data[i + rng.randint(1, 8) :]


def _token_edit(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    tokens = _tokenise(data)
    if not tokens:
        return data
    i = rng.randrange(len(tokens))
    match rng.randrange(4):
        case 0:
            del tokens[i]
        case 1:
            tokens.insert(i, tokens[i])
        case 2:
            j = rng.randrange(len(tokens))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        case _:
            tokens[i] = rng.choice(_TOKENS + _KEYS).encode("utf-8", "surrogatepass")
    return b"".join(tokens)


def _insert_token(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    tokens = _tokenise(data)
    i = rng.randrange(len(tokens) + 1)
    word = rng.choice(_TOKENS + _KEYS).encode("utf-8", "surrogatepass")
    return b"".join([*tokens[:i], word, *tokens[i:]])


def _splice(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    other = rng.choice(seeds)
    return data[: rng.randint(0, len(data))] + other[rng.randint(0, len(other)) :]


_MUTATORS: list[Callable[[random.Random, bytes, list[bytes]], bytes]] = [
    _flip,
    _insert_byte,
    _delete_bytes,
    _token_edit,
    _token_edit,
    _insert_token,
    _splice,
]


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = rng.choice(seeds)
    for _ in range(rng.randint(1, 4)):
        data = rng.choice(_MUTATORS)(rng, data, seeds)
    return data


class _Generator:
    """Random text of the NATS configuration language, mostly well formed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.keys_defined: list[str] = []

    def key(self) -> str:
        r = self.rng.random()
        if r < 0.75:
            key = self.rng.choice(_KEYS)
        elif r < 0.9:
            key = self.rng.choice(["a", "foo.bar", "orders.*", "x.>", "_", "K" * 40, "é"])
        else:
            key = "".join(self.rng.choice("abcXYZ_.-*>0") for _ in range(self.rng.randint(1, 9)))
        if self.rng.random() < 0.15:
            key = f'"{key}"' if self.rng.random() < 0.7 else f"'{key}'"
        self.keys_defined.append(key.strip("\"'"))
        return key

    def scalar(self) -> str:
        rng = self.rng
        match rng.randrange(12):
            case 0:
                return str(rng.choice([0, 1, -1, 7, 1000, 2**31, 2**63 - 1, -(2**63), 2**64]))
            case 1:
                suffix = rng.choice(["", "k", "KB", "kb", "M", "MiB", "g", "GB", "T", "TiB", "x"])
                return f"{rng.randint(-5, 99999)}{suffix}"
            case 2:
                return rng.choice(["1.5", "-0.0", "3e8", "1e400", ".5", "5."])
            case 3:
                return rng.choice(["true", "false", "yes", "no", "on", "off", "TRUE", "Yes"])
            case 4:
                unit = rng.choice(["ns", "us", "ms", "s", "m", "h", "d", "", "µs"])
                value = f"{rng.choice(['', '-', '+'])}{rng.randint(0, 999)}{unit}"
                return f'"{value}"' if rng.random() < 0.7 else value
            case 5:
                return rng.choice(["2016-05-04T18:53:41Z", "2016-13-45T99:99:99Z", "2016-05-04"])
            case 6:
                if self.keys_defined and rng.random() < 0.6:
                    return "$" + rng.choice(self.keys_defined)
                return rng.choice(["$X", "$NUM", "$EMPTY", "$BAD", "$MAP", "$missing"])
            case 7:
                escapes = ["\\n", "\\t", '\\"', "\\\\", "\\x41", "\\u00e9", "\\q", "\\x", "\\"]
                body = "".join(
                    rng.choice(["a", " ", ".", *escapes]) for _ in range(rng.randint(0, 6))
                )
                return f'"{body}"'
            case 8:
                return f"'{rng.choice(['', 'x', 'a b', 'MEMORY', 'FILE', 'SQL', 'mysql'])}'"
            case 9:
                return rng.choice(["MEMORY", "file", "sql", "AES", "CHACHA", "mysql", "postgres"])
            case 10:
                return (
                    f'"{rng.choice(["nats://127.0.0.1:4222", "udp://x:514", "a.b.c", "/tmp/x"])}"'
                )
            case _:
                return "(" + rng.choice(["block string", "", "x)"]) + ")"

    def typed_value(self, key: str, depth: int) -> str | None:
        """A value of the right type for an option or a section's map, to get past the
        type checks into the rules (None: no such key)."""
        rng = self.rng
        if key in _SECTION_BY_KEY or key in CHANNELS_KEYS:
            section = _SECTION_BY_KEY.get(key, "store_limits")
            if key in CHANNELS_KEYS:
                names = ['"foo"', '"foo.*"', '"foo.>"', '"a.b.c"', '"foo..x"', '">"', '"*.b"']
                entries = [f"{rng.choice(names)}: {self.limits_map(depth)}" for _ in range(3)]
                return "{\n" + "\n".join(entries) + "\n}"
            keys = [k for o in OPTIONS if o.section == section for k in o.keys]
            entries = [self.option_entry(rng.choice(keys), depth + 1) for _ in range(4)]
            return "{\n" + "\n".join(entries) + "\n}" if keys else None
        opt = _OPTION_BY_KEY.get(key)
        if opt is None:
            return None
        match opt.kind:
            case Kind.INT | Kind.SIZE:
                return str(rng.choice([0, 1, -1, 5, 100, 65535, 70000, "1MB", "10KB"]))
            case Kind.DURATION:
                return rng.choice(['"1s"', '"10ms"', '"0"', '"1h30m"', '"-1s"', '"2ms"', "5"])
            case Kind.BOOL:
                return rng.choice(["true", "false"])
            case Kind.STRINGS:
                return '["a", "b"]'
            case _:
                if opt.choices:
                    return rng.choice([*opt.choices, "bogus"])
                return rng.choice(['"x"', '""', '"a.b"', '"/tmp/stanpkg-fuzz"'])

    def limits_map(self, depth: int) -> str:
        keys = [k for o in OPTIONS if o.per_channel for k in o.keys]
        entries = [self.option_entry(self.rng.choice(keys), depth + 1) for _ in range(2)]
        return "{ " + "; ".join(entries) + " }"

    def option_entry(self, key: str, depth: int) -> str:
        value = self.typed_value(key, depth) if depth < 5 else None
        return f"{key}: {value if value is not None else self.scalar()}"

    def value(self, depth: int) -> str:
        r = self.rng.random()
        if depth < 5 and r < 0.18:
            return self.map_block(depth + 1)
        if depth < 5 and r < 0.28:
            items = [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
            sep = self.rng.choice([", ", ",", "\n", " "])
            return "[" + sep.join(items) + "]"
        return self.scalar()

    def entry(self, depth: int) -> str:
        rng = self.rng
        if rng.random() < 0.04:
            return f'include "{rng.choice([*INCLUDE_FILES, "inc/x.conf", "missing.conf", ""])}"'
        if rng.random() < 0.05:
            return rng.choice(["# a comment", "// a comment", "", "  "])
        sep = rng.choice([": ", ":", " = ", "=", " ", "\t"])
        key = self.key()
        typed = self.typed_value(key.strip("\"'"), depth) if rng.random() < 0.5 else None
        value = typed if typed is not None and depth < 5 else self.value(depth)
        if value.startswith("{") and rng.random() < 0.5:
            sep = " "
        return f"{key}{sep}{value}"

    def map_block(self, depth: int) -> str:
        n = self.rng.randint(0, 5)
        sep = self.rng.choice(["\n", "; ", ", ", " "])
        inner = sep.join(self.entry(depth) for _ in range(n))
        return "{" + sep + inner + sep + "}"

    def document(self) -> str:
        body = "\n".join(self.entry(0) for _ in range(self.rng.randint(1, 12)))
        if self.rng.random() < 0.3:
            body = "streaming {\n" + body + "\n}\n"
        return body + ("\n" if self.rng.random() < 0.8 else "")


def generate(rng: random.Random) -> bytes:
    return _Generator(rng).document().encode("utf-8", "surrogatepass")


# Environment the inputs are compiled with ($X etc. resolve to these).
ENVIRONMENT: dict[str, str] = {
    "X": "5",
    "NUM": "1GB",
    "EMPTY": "",
    "BAD": "{ [ unbalanced",
    "MAP": "{ max_msgs: 3 }",
    "NATS_STREAMING_ENCRYPTION_KEY": "fuzz-key",
}


def make_input(seed: int, index: int, seeds: list[bytes]) -> bytes:
    """The input number ``index`` of the campaign ``seed``: 2 in 3 mutated, 1 generated."""
    rng = random.Random(seed * 1_000_003 + index)
    if index % 3 == 2:
        return generate(rng)
    return mutate(rng, seeds)


_FLAGGED = [o for o in OPTIONS if o.flags]
_FLAG_VALUES = [
    *("", "-1", "0", "1", "65536", "99999999999999999999", "1MB", "-5KB", "1.5", "1h", "-1s"),
    *("abc", "true", "false", "T", "a,b,,c", "nats://u:p@127.0.0.1:-1", "nats://h:99999"),
    *("nats://t@h:4222", "udp://x:514", "/nonexistent/file", "MEMORY", "file", "AES", "é"),
]


def make_flags(seed: int, index: int) -> list[str]:
    """Command-line flags for input ``index``: none for 2 in 3 inputs, else one to three
    flags of the options table with awkward values, in every spelling Go's flag takes."""
    rng = random.Random(seed * 7_919 + index)
    if rng.random() < 2 / 3:
        return []
    argv: list[str] = []
    for _ in range(rng.randint(1, 3)):
        opt = rng.choice(_FLAGGED)
        flag = rng.choice(opt.flags)
        value = rng.choice(_FLAG_VALUES)
        if opt.kind is Kind.BOOL:
            argv.append(flag if rng.random() < 0.5 else f"{flag}={value}")
        elif rng.random() < 0.3:
            argv.append(f"{flag}={value}")
        else:
            argv += [flag, value]
    return argv
