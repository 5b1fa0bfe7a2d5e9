"""Options of the ``stan`` data source, parsed once into an immutable value.

Spark hands a data source its options as strings (keys case-insensitive). Everything is
checked here, where the query is planned, so a typo fails the query with the option's
name instead of surfacing on an executor. Settings that must match the server (channel
limits, CRC, encryption key, directory) come from its configuration file when ``config``
is given: the same plan the server runs from (stanpkg.plan), never a second parser.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from stanpkg.pipeline.archive_layout import default_archive_dir
from stanpkg.plan.compile import compile_args
from stanpkg.plan.encryption import ENCRYPTION_KEY_ENV
from stanpkg.plan.limits import StoreLimits
from stanpkg.plan.subjects import SubjectTree, channel_name_problem
from stanpkg.stores.file.format import IEEE_POLY

__all__ = ["ChannelSelector", "OptionError", "ReadOptions", "parse_time"]

MODES = ("FAILFAST", "PERMISSIVE")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "")


class OptionError(ValueError):
    """An invalid data source / export option (the message names the option)."""


@dataclass(frozen=True)
class ChannelSelector:
    """Channel names and NATS wildcard patterns (``orders.*``, ``audit.>``); empty = all."""

    patterns: tuple[str, ...] = ()
    _tree: SubjectTree[bool] = field(default_factory=SubjectTree, compare=False, repr=False)

    def __post_init__(self) -> None:
        for pattern in self.patterns:
            problem = channel_name_problem(pattern, allow_wildcards=True)
            if problem is not None:
                raise OptionError(f"channels: invalid channel pattern {pattern!r}: {problem}")
            self._tree.insert(pattern, True)

    @classmethod
    def parse(cls, text: str | None) -> ChannelSelector:
        """A comma-separated list, or a JSON array, of names/patterns."""
        if text is None or not text.strip():
            return cls()
        text = text.strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError as exc:
                raise OptionError(f"channels: invalid JSON list: {exc}") from None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise OptionError("channels: the JSON form must be a list of strings")
        else:
            items = text.split(",")
        return cls(tuple(dict.fromkeys(i.strip() for i in items if i.strip())))

    def matches(self, channel: str) -> bool:
        return not self.patterns or bool(self._tree.match_list(channel))

    def __reduce__(self) -> tuple[type[ChannelSelector], tuple[tuple[str, ...]]]:
        return (ChannelSelector, (self.patterns,))  # the tree is rebuilt after unpickling


@dataclass(frozen=True)
class ReadOptions:
    """Everything a read needs, resolved (picklable: shipped to the planning worker)."""

    path: str
    channels: ChannelSelector = ChannelSelector()
    from_sequence: int | None = None
    to_sequence: int | None = None
    from_time_ns: int | None = None
    to_time_ns: int | None = None
    starting_sequences: Mapping[str, int] = field(default_factory=dict)
    ending_sequences: Mapping[str, int] = field(default_factory=dict)
    include_archived: bool = False
    include_removed: bool = False
    archive_dir: str = ""
    permissive: bool = False
    encryption_key: bytes | None = field(default=None, repr=False)
    do_crc: bool = True
    crc_poly: int = IEEE_POLY
    # The server's limits (re-applied as at its recovery); None = unlimited.
    store_limits: StoreLimits | None = field(default=None, repr=False)
    batch_rows: int = 8192
    only_channels: frozenset[str] | None = None  # exact names (from pushed-down filters)

    @classmethod
    def parse(
        cls, options: Mapping[str, str], environ: Mapping[str, str] | None = None
    ) -> ReadOptions:
        env = os.environ if environ is None else environ
        opts = {k.lower(): v for k, v in options.items()}
        known = {
            "path", "config", "channels", "fromsequence", "tosequence", "fromtime", "totime",
            "startingsequences", "endingsequences", "includearchived", "includeremoved",
            "archivedir", "mode", "encryptionkey", "batchrows",
        }  # fmt: skip
        unknown = sorted(set(opts) - known)
        if unknown:
            raise OptionError(f"unknown option(s): {', '.join(unknown)}")

        config = opts.get("config")
        plan = None
        if config:
            compiled = compile_args(["-sc", config], env)
            if compiled.plan is None:
                problems = "; ".join(str(d) for d in compiled.diagnostics) or compiled.usage_error
                raise OptionError(f"config: {config}: {problems}")
            plan = compiled.plan
        else:
            plan = compile_args([], {}).plan  # the server's defaults
        assert plan is not None

        path = opts.get("path") or (plan.dir if config else "")
        if not path:
            raise OptionError("path: the datastore directory is required (or give config)")

        # Key precedence: the option, then the server's rule (environment over file).
        key: bytes | None = None
        if opts.get("encryptionkey"):
            key = opts["encryptionkey"].encode()
        elif env.get(ENCRYPTION_KEY_ENV):
            key = os.fsencode(env[ENCRYPTION_KEY_ENV])
        elif config and plan.encrypt and plan.encryption_key:
            key = plan.encryption_key.reveal().encode()

        mode = opts.get("mode", "FAILFAST").upper()
        if mode not in MODES:
            raise OptionError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        return cls(
            path=path,
            channels=ChannelSelector.parse(opts.get("channels")),
            from_sequence=_sequence(opts, "fromsequence"),
            to_sequence=_sequence(opts, "tosequence"),
            from_time_ns=_time(opts, "fromtime"),
            to_time_ns=_time(opts, "totime"),
            starting_sequences=_sequence_map(opts, "startingsequences"),
            ending_sequences=_sequence_map(opts, "endingsequences"),
            include_archived=_flag(opts, "includearchived"),
            include_removed=_flag(opts, "includeremoved"),
            archive_dir=opts.get("archivedir") or default_archive_dir(path),
            permissive=mode == "PERMISSIVE",
            encryption_key=key,
            do_crc=plan.file_options.crc,
            crc_poly=plan.file_options.crc_poly or IEEE_POLY,
            store_limits=plan.store_limits,
            batch_rows=_positive(opts, "batchrows", 8192),
        )

    def wants_channel(self, channel: str) -> bool:
        if self.only_channels is not None and channel not in self.only_channels:
            return False
        return self.channels.matches(channel)

    def sequence_range(self, channel: str) -> tuple[int, int]:
        """Inclusive bounds for ``channel`` from the global and per-channel options."""
        lo = max(self.from_sequence or 1, self.starting_sequences.get(channel, 1))
        hi = min(
            self.to_sequence if self.to_sequence is not None else 2**64,
            self.ending_sequences.get(channel, 2**64),
        )
        return lo, hi


def parse_time(text: str) -> int:
    """Unix nanoseconds from digits, or an ISO 8601 date/datetime (no zone = UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        if len(text) == 10:  # a date alone: its midnight
            day = date.fromisoformat(text)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _flag(opts: Mapping[str, str], name: str) -> bool:
    value = opts.get(name, "false").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise OptionError(f"{name}: expected true or false, got {value!r}")


def _sequence(opts: Mapping[str, str], name: str) -> int | None:
    if name not in opts or not opts[name].strip():
        return None
    return _positive(opts, name, 0)


def _positive(opts: Mapping[str, str], name: str, default: int) -> int:
    text = opts.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"{name}: expected a positive integer, got {text!r}") from None
    if value < 1:
        raise OptionError(f"{name}: expected a positive integer, got {value}")
    return value


def _seconds(opts: Mapping[str, str], name: str, default: float) -> float:
    text = opts.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"{name}: expected seconds, got {text!r}") from None
    if not value > 0:
        raise OptionError(f"{name}: expected a positive number of seconds, got {text!r}")
    return value


def _time(opts: Mapping[str, str], name: str) -> int | None:
    text = opts.get(name, "").strip()
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError as exc:
        raise OptionError(f"{name}: {exc} (use ISO 8601 or Unix nanoseconds)") from None


def _sequence_map(opts: Mapping[str, str], name: str) -> dict[str, int]:
    text = opts.get(name, "").strip()
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{name}: invalid JSON: {exc}") from None
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in raw.items()
    ):
        raise OptionError(f'{name}: expected a JSON object {{"channel": sequence, ...}}')
    return dict(raw)
