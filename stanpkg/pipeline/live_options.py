"""Options of the ``stan`` source when it reads a live server (``option("servers", ...)``).

Parsed once where the query is planned, into an immutable, picklable value that the
executors receive with every partition. A wrong option fails the query naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stanpkg.pipeline.connection_options import CONNECTION_OPTIONS, ConnectionOptions
from stanpkg.pipeline.options import (
    ChannelSelector,
    OptionError,
    _flag,
    _positive,
    _seconds,
    _sequence_map,
)

__all__ = ["LIVE_OPTIONS", "LiveOptions", "Offsets", "parse_offsets"]

Offsets = dict[str, int]
"""Per channel, the last sequence already read (a micro-batch reads (start, end])."""

EARLIEST = "earliest"
LATEST = "latest"

# Lower-cased, as Spark hands options case-insensitively.
LIVE_OPTIONS = CONNECTION_OPTIONS | {
    "channels", "startingoffsets", "endingoffsets", "maxmessagespertrigger",
    "maxmessagesperpartition", "failondataloss", "monitor", "idletimeout", "probetimeout",
}  # fmt: skip


@dataclass(frozen=True)
class LiveOptions:
    """What reading a live STAN server needs."""

    connection: ConnectionOptions
    channels: ChannelSelector
    starting: str | Offsets = EARLIEST
    ending: str | Offsets = LATEST
    max_per_trigger: int | None = None
    max_per_partition: int = 100_000
    fail_on_data_loss: bool = True
    monitor: str = ""
    idle_timeout: float = 30.0
    probe_timeout: float = 0.5

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> LiveOptions:
        opts = {k.lower(): v for k, v in options.items()}
        if "path" in opts or "config" in opts:
            given = "path" if "path" in opts else "config"
            raise OptionError(
                f"servers and {given}: give servers (read a live server) or "
                f"{given} (read a FILE store on disk), not both"
            )
        unknown = sorted(set(opts) - LIVE_OPTIONS)
        if unknown:
            raise OptionError(f"unknown option(s) for a live read: {', '.join(unknown)}")
        connection = ConnectionOptions.parse(opts)
        channels = ChannelSelector.parse(opts.get("channels"))
        if not channels.patterns:
            raise OptionError("channels: expected channel names or patterns (orders.*,audit)")
        monitor = opts.get("monitor", "").strip().rstrip("/")
        if not monitor and any(_is_pattern(p) for p in channels.patterns):
            raise OptionError(
                "channels: wildcard patterns need the monitor option (the server's "
                "monitoring URL, to list channels): STAN clients cannot list channels"
            )
        if monitor and not monitor.startswith(("http://", "https://")):
            raise OptionError(f"monitor: expected an http(s):// URL, got {monitor!r}")
        max_trigger = opts.get("maxmessagespertrigger", "").strip()
        return cls(
            connection=connection,
            channels=channels,
            starting=_offsets_option(opts, "startingoffsets", EARLIEST),
            ending=_offsets_option(opts, "endingoffsets", LATEST),
            max_per_trigger=(_positive(opts, "maxmessagespertrigger", 0) if max_trigger else None),
            max_per_partition=_positive(opts, "maxmessagesperpartition", 100_000),
            fail_on_data_loss=_flag({"failondataloss": "true", **opts}, "failondataloss"),
            monitor=monitor,
            idle_timeout=_seconds(opts, "idletimeout", 30.0),
            probe_timeout=_seconds(opts, "probetimeout", 0.5),
        )


def is_live(options: Mapping[str, str]) -> bool:
    """True when the options ask for a live read (``servers`` given)."""
    return any(k.lower() == "servers" for k in options)


def parse_offsets(text: str, name: str) -> Offsets:
    """A JSON object {"channel": sequence, ...} (sequence = last one already read)."""
    return _sequence_map({name: text}, name)


def _offsets_option(opts: Mapping[str, str], name: str, default: str) -> str | Offsets:
    text = opts.get(name, "").strip()
    if not text:
        return default
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    return parse_offsets(text, name)


def _is_pattern(pattern: str) -> bool:
    return any(token in ("*", ">") for token in pattern.split("."))
