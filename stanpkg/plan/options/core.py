"""What an option is: its :class:`Option` record and :class:`Kind`, the sections of the
normalised configuration and the helpers the section tables build options with."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    INT = "int"
    SIZE = "size"  # integer, NATS size suffixes allowed (10MB, 1KiB)
    DURATION = "duration"  # Go duration string ("1h30m"), stored as nanoseconds
    BOOL = "bool"
    STRING = "string"
    STRINGS = "strings"  # array of strings in a file, comma-separated on the command line


# Sections of the normalised configuration, in documentation order, with the config keys
# that name each section's map (first = canonical). Top level has no map.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "": (),
    "store_limits": ("store_limits", "limits", "storelimits"),
    "file_options": ("file_options", "file"),
    "sql_options": ("sql_options", "sql"),
    "cluster": ("cluster",),
    "tls": ("tls",),
    "nats_server": (),
}

SECTION_TITLES: dict[str, str] = {
    "": "Streaming server",
    "store_limits": "Store limits",
    "file_options": "File store",
    "sql_options": "SQL store",
    "cluster": "Clustering",
    "tls": "TLS connection to NATS",
    "nats_server": "Embedded NATS server and logging",
}

# Keys of a per-channel limits map inside store_limits (and the keys naming that map).
CHANNELS_KEYS = (
    "channels",
    "channels_limits",
    "channelslimits",
    "per_channel",
    "per_channel_limits",
)


def moot_in_clustered_mode(instead: str) -> str:
    """The doc of one of the reference's Raft/bbolt tuning options (plan/rules.py warns)."""
    return (
        f"Accepted for compatibility and ignored (a warning when clustered): {instead} "
        "(docs/clustering.md)."
    )


@dataclass(frozen=True)
class Option:
    path: str
    kind: Kind
    default: object
    help: str
    keys: tuple[str, ...] = ()  # config-file keys within the section; () = not settable in a file
    flags: tuple[str, ...] = ()  # command-line flags as the reference's usage shows them
    minimum: int | None = None
    maximum: int | None = None
    range_error: str = ""  # message when out of range; {value} is the value as written
    choices: tuple[str, ...] = ()  # case-insensitive allowed values of a STRING
    env: str = ""  # environment variable that overrides the file (flags still win)
    secret: bool = False  # never printed, never written into a plan dump
    url_credentials: bool = False  # URLs: the password (or token) in them is never shown
    per_channel: bool = False  # also a key of per-channel limit maps
    file_path: bool = False  # names a file that must exist and be readable
    dir_path: bool = False  # names a directory the server creates if missing and writes into
    metavar: str = ""
    # Where ``help`` (the reference's usage text, kept for --help) is wrong for stanpkg:
    # the description docs/configuration.md shows instead, and the default in words when
    # the literal default stands for a choice made at run time.
    doc: str = ""
    default_doc: str = ""
    # 0 stands for the default (as the reference reads the Raft timeouts), so the
    # minimum applies to the other values only.
    zero_is_default: bool = False

    @property
    def description(self) -> str:
        """What the docs and the schema say of the option."""
        return self.doc or self.help

    @property
    def section(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]


def limit_option(
    name: str,
    kind: Kind,
    default: int,
    keys: tuple[str, ...],
    flags: tuple[str, ...],
    what: str,
    help: str,
) -> Option:
    return Option(
        f"store_limits.{name}",
        kind,
        default,
        help,
        keys=keys,
        flags=flags,
        minimum=0,
        range_error=f"max {what} limit cannot be negative ({{value}})",
        per_channel=name != "max_channels",
    )
