"""Options of the ``stan`` source when it reads a live server (``option("servers", ...)``).

Parsed once where the query is planned, into an immutable, picklable value that the
executors receive with every partition. A wrong option fails the query naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from stanpkg.pipeline.options import (
    ChannelSelector,
    OptionError,
    _flag,
    _positive,
    _sequence_map,
)

__all__ = [
    "CONNECTION_OPTIONS",
    "LIVE_OPTIONS",
    "ConnectionFields",
    "ConnectionOptions",
    "LiveOptions",
    "Offsets",
    "connection_fields",
    "parse_offsets",
]

Offsets = dict[str, int]
"""Per channel, the last sequence already read (a micro-batch reads (start, end])."""

EARLIEST = "earliest"
LATEST = "latest"

# Lower-cased, as Spark hands options case-insensitively. The connection's are shared by
# the live source and the sink (sink_options.py).
CONNECTION_OPTIONS = frozenset(
    {
        "servers", "cluster_id", "clusterid", "user", "password", "token", "credentials",
        "nkeyseedfile", "tlsca", "tlscert", "tlskey", "tlsskipverify", "connecttimeout",
        "clientidprefix",
    }
)  # fmt: skip
LIVE_OPTIONS = CONNECTION_OPTIONS | {
    "channels", "startingoffsets", "endingoffsets", "maxmessagespertrigger",
    "maxmessagesperpartition", "failondataloss", "monitor", "idletimeout", "probetimeout",
}  # fmt: skip


class ConnectionOptions(Protocol):
    """What connecting to a STAN server needs (live_client.connected): the options of the
    live source and of the sink both have it."""

    @property
    def servers(self) -> str: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def password(self) -> str: ...
    @property
    def token(self) -> str: ...
    @property
    def credentials(self) -> str: ...
    @property
    def nkey_seed_file(self) -> str: ...
    @property
    def tls_ca(self) -> str: ...
    @property
    def tls_cert(self) -> str: ...
    @property
    def tls_key(self) -> str: ...
    @property
    def tls_skip_verify(self) -> bool: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def client_id_prefix(self) -> str: ...
    @property
    def uses_tls(self) -> bool: ...


class ConnectionFields(TypedDict):
    servers: str
    cluster_id: str
    user: str
    password: str
    token: str
    credentials: str
    nkey_seed_file: str
    tls_ca: str
    tls_cert: str
    tls_key: str
    tls_skip_verify: bool
    connect_timeout: float
    client_id_prefix: str


def connection_fields(opts: Mapping[str, str]) -> ConnectionFields:
    """The connection options, checked (``opts``: lower-cased keys)."""
    servers = opts.get("servers", "").strip()
    if not servers:
        raise OptionError("servers: expected NATS URLs (nats://host:4222,...)")
    cluster_id = (opts.get("cluster_id") or opts.get("clusterid") or "").strip()
    if not cluster_id:
        raise OptionError("cluster_id: the STAN cluster ID is required")
    return ConnectionFields(
        servers=servers,
        cluster_id=cluster_id,
        user=opts.get("user", ""),
        password=opts.get("password", ""),
        token=opts.get("token", ""),
        credentials=opts.get("credentials", ""),
        nkey_seed_file=opts.get("nkeyseedfile", ""),
        tls_ca=opts.get("tlsca", ""),
        tls_cert=opts.get("tlscert", ""),
        tls_key=opts.get("tlskey", ""),
        tls_skip_verify=_flag(opts, "tlsskipverify"),
        connect_timeout=_seconds(opts, "connecttimeout", 5.0),
        client_id_prefix=_client_id_prefix(opts.get("clientidprefix", "stanpkg-spark")),
    )


@dataclass(frozen=True)
class LiveOptions:
    """What reading a live STAN server needs (credentials stay out of ``repr``)."""

    servers: str
    cluster_id: str
    channels: ChannelSelector
    starting: str | Offsets = EARLIEST
    ending: str | Offsets = LATEST
    max_per_trigger: int | None = None
    max_per_partition: int = 100_000
    fail_on_data_loss: bool = True
    monitor: str = ""
    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    credentials: str = ""
    nkey_seed_file: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_skip_verify: bool = False
    connect_timeout: float = 5.0
    idle_timeout: float = 30.0
    probe_timeout: float = 0.5
    client_id_prefix: str = "stanpkg-spark"

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
        connection = connection_fields(opts)
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
            channels=channels,
            starting=_offsets_option(opts, "startingoffsets", EARLIEST),
            ending=_offsets_option(opts, "endingoffsets", LATEST),
            max_per_trigger=(_positive(opts, "maxmessagespertrigger", 0) if max_trigger else None),
            max_per_partition=_positive(opts, "maxmessagesperpartition", 100_000),
            fail_on_data_loss=_flag({"failondataloss": "true", **opts}, "failondataloss"),
            monitor=monitor,
            idle_timeout=_seconds(opts, "idletimeout", 30.0),
            probe_timeout=_seconds(opts, "probetimeout", 0.5),
            **connection,
        )

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert or self.tls_skip_verify)


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


def _client_id_prefix(text: str) -> str:
    text = text.strip()
    if not text or not all(c.isalnum() or c in "-_" for c in text):
        raise OptionError(
            f"clientIdPrefix: letters, digits, '-' and '_' only (a STAN client ID), got {text!r}"
        )
    return text


def _is_pattern(pattern: str) -> bool:
    return any(token in ("*", ">") for token in pattern.split("."))
