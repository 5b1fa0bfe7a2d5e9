"""``/metrics``: the server state in the Prometheus text format, read at scrape time.

Metric names, types, help texts and labels are those of the prometheus-nats-exporter's
streaming collector (``-serverz -channelz``), so dashboards built on it keep working;
the ``stanpkg extras`` below add what it lacked. Nothing is counted per message for
this: a scrape walks the registries once (:func:`collect`, on the event loop, paced)
and renders that snapshot in a worker thread (:func:`render`).

Prometheus conventions are followed by families of their own, next to the exporter's
(which dashboards query and which are kept exactly as they were): counters that only go
up, named ``*_total`` (``nss_server_in_msgs_total`` beside the exporter's
``nss_server_msgs_in``), and gauges for the exporter's "counters" that go down
(``nss_server_current_channels``) and for its gauges named ``*_total``
(``nss_chan_stored_msgs``). docs/monitoring.md has the table.

A scraper that asks for OpenMetrics (``Accept: application/openmetrics-text``, as
Prometheus does) gets it: the same sample names, the conventional counters typed
``counter``, and the exporter's families that break OpenMetrics' rules for counters
typed ``unknown`` (their samples unchanged, so queries keep working).

The text is written here rather than by ``prometheus_client.generate_latest``: the
exporter's counters ``nss_server_msgs_in`` & co. have no ``_total`` suffix, which
prometheus_client's counters always add, and its generic per-sample formatting takes
seconds for the 300k+ samples of 100k subscriptions (see bench/monitor/README.md).
The process metrics come from prometheus_client: ours (``process_*``, ``python_*``)
and the embedded nats-server's (``nats_server_process_*``, read from its /proc entry).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from stanpkg.monitor.gojson import go_time
from stanpkg.monitor.pacing import Pacer
from stanpkg.server.monitoring_views import (
    ChannelView,
    NatsLinkView,
    ServerTotals,
    ServerView,
    SubscriptionView,
)

__all__ = [
    "CONTENT_TYPE",
    "Exposition",
    "Family",
    "MetricsSnapshot",
    "collect",
    "negotiate",
    "render",
    "render_gzip",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_OPENMETRICS = "application/openmetrics-text"
_CHUNK_LINES = 2048

Row = TypeVar("Row")


class Family(NamedTuple):
    name: str  # the samples' name, as written in both formats
    type: str  # "counter" | "gauge"
    help: str
    # False for the exporter's families that break Prometheus' rules (a counter without
    # ``_total`` or that goes down, a gauge named ``*_total``): typed ``unknown`` in
    # OpenMetrics, which refuses them otherwise.
    conventional: bool = True


def _exporter(name: str, type_: str, help_: str) -> Family:
    """One of the exporter's families, kept as dashboards know it."""
    conventional = (type_ == "counter") == name.endswith("_total") and name not in _GOES_DOWN
    return Family(name, type_, help_, conventional)


# The exporter's counters that are current counts or stored totals: they go down.
_GOES_DOWN = frozenset(
    {
        "nss_server_bytes_total",
        "nss_server_msgs_total",
        "nss_server_channels",
        "nss_server_subscriptions",
        "nss_server_clients",
    }
)


# -- the exporter's families (collector/streaming.go) ------------------------------------
# Server families carry ``server_id``; channel families ``server_id, server_role,
# channel``; subscription families add ``client_id, inbox, queue_name, is_durable,
# is_offline, durable_name``.

SERVER_FAMILIES: tuple[tuple[Family, Callable[[ServerTotals], int]], ...] = (
    (_exporter("nss_server_bytes_total", "counter", "Total of bytes"), lambda t: t.total_bytes),
    (_exporter("nss_server_msgs_total", "counter", "Total of messages"), lambda t: t.total_msgs),
    (_exporter("nss_server_bytes_in", "counter", "Incoming bytes"), lambda t: t.in_bytes),
    (_exporter("nss_server_bytes_out", "counter", "Outgoing bytes"), lambda t: t.out_bytes),
    (_exporter("nss_server_msgs_in", "counter", "Incoming messages"), lambda t: t.in_msgs),
    (_exporter("nss_server_msgs_out", "counter", "Outgoing messages"), lambda t: t.out_msgs),
    (_exporter("nss_server_channels", "counter", "Total channels"), lambda t: t.channels),
    (
        _exporter("nss_server_subscriptions", "counter", "Total subscriptions"),
        lambda t: t.subscriptions,
    ),
    (_exporter("nss_server_clients", "counter", "Total clients"), lambda t: t.clients),
    (
        _exporter(
            "nss_server_leader_promotions",
            "counter",
            "Times this node became the cluster's serving node (stanpkg)",
        ),
        lambda t: t.leader_promotions,
    ),
    # stanpkg extra
    (
        _exporter("nss_server_msgs_redelivered", "counter", "Messages sent again (stanpkg)"),
        lambda t: t.redelivered_msgs,
    ),
)
SERVER_ACTIVE = _exporter("nss_server_active", "gauge", "Active server")

# The server's link to NATS (stanpkg): its outages, which the server rides out.
NATS_FAMILIES: tuple[tuple[Family, Callable[[NatsLinkView], float]], ...] = (
    (
        Family("nss_server_nats_connected", "gauge", "1 while the server is connected to NATS"),
        lambda n: int(n.connected),
    ),
    (
        Family(
            "nss_server_nats_reconnects_total",
            "counter",
            "Times the server got its connection to NATS back after losing it",
        ),
        lambda n: n.reconnects,
    ),
    (
        Family(
            "nss_server_nats_disconnected_seconds_total",
            "counter",
            "Seconds the server spent without its connection to NATS",
        ),
        lambda n: round(n.disconnected_seconds, 3),
    ),
)
SERVER_INFO = _exporter("nss_server_info", "gauge", "Info")

# Prometheus' conventions for the same numbers: counters that never go down end in
# ``_total``; current counts and stored totals are gauges.
CONVENTIONAL_SERVER_FAMILIES: tuple[tuple[Family, Callable[[ServerTotals], int]], ...] = (
    (
        Family("nss_server_in_msgs_total", "counter", "Messages published to this server"),
        lambda t: t.in_msgs,
    ),
    (
        Family("nss_server_in_bytes_total", "counter", "Bytes of messages published"),
        lambda t: t.in_bytes,
    ),
    (
        Family("nss_server_out_msgs_total", "counter", "Messages sent to subscribers"),
        lambda t: t.out_msgs,
    ),
    (
        Family("nss_server_out_bytes_total", "counter", "Bytes of messages sent to subscribers"),
        lambda t: t.out_bytes,
    ),
    (
        Family("nss_server_redelivered_msgs_total", "counter", "Messages sent again"),
        lambda t: t.redelivered_msgs,
    ),
    (
        Family(
            "nss_server_became_leader_total",
            "counter",
            "Times this node became the cluster's serving node",
        ),
        lambda t: t.leader_promotions,
    ),
    (Family("nss_server_stored_msgs", "gauge", "Messages stored"), lambda t: t.total_msgs),
    (Family("nss_server_stored_bytes", "gauge", "Bytes stored"), lambda t: t.total_bytes),
    (Family("nss_server_current_channels", "gauge", "Channels"), lambda t: t.channels),
    (
        Family("nss_server_current_subscriptions", "gauge", "Subscriptions"),
        lambda t: t.subscriptions,
    ),
    (Family("nss_server_current_clients", "gauge", "Connected clients"), lambda t: t.clients),
)

CHANNEL_FAMILIES: tuple[tuple[Family, Callable[[ChannelView], float]], ...] = (
    (_exporter("nss_chan_bytes_total", "gauge", "Total of bytes"), lambda c: c.bytes),
    (_exporter("nss_chan_msgs_total", "gauge", "Total of messages"), lambda c: c.msgs),
    (_exporter("nss_chan_last_seq", "gauge", "Last seq"), lambda c: c.last_seq),
    # The stored totals again, under names without the counters' ``_total``.
    (Family("nss_chan_stored_msgs", "gauge", "Messages stored"), lambda c: c.msgs),
    (Family("nss_chan_stored_bytes", "gauge", "Bytes stored"), lambda c: c.bytes),
    # stanpkg extras: the first available sequence, subscriptions and the limits
    # (0 = unlimited) of each channel.
    (_exporter("nss_chan_first_seq", "gauge", "First seq (stanpkg)"), lambda c: c.first_seq),
    (
        _exporter(
            "nss_chan_subscriptions", "gauge", "Subscriptions, offline ones included (stanpkg)"
        ),
        lambda c: c.subs_count,
    ),
    (
        _exporter("nss_chan_limit_msgs", "gauge", "Channel limit: max messages, 0 = unlimited"),
        lambda c: c.limits.max_msgs,
    ),
    (
        _exporter("nss_chan_limit_bytes", "gauge", "Channel limit: max bytes, 0 = unlimited"),
        lambda c: c.limits.max_bytes,
    ),
    (
        _exporter("nss_chan_limit_age_seconds", "gauge", "Channel limit: max age, 0 = unlimited"),
        lambda c: c.limits.max_age / 1e9,
    ),
    (
        _exporter(
            "nss_chan_limit_subscriptions",
            "gauge",
            "Channel limit: max subscriptions, 0 = unlimited",
        ),
        lambda c: c.limits.max_subs,
    ),
    (
        _exporter(
            "nss_chan_limit_inactivity_seconds",
            "gauge",
            "Channel limit: deleted after this long without subscriptions, 0 = never",
        ),
        lambda c: c.limits.max_inactivity / 1e9,
    ),
)

SUBSCRIPTION_FAMILIES: tuple[tuple[Family, Callable[[SubscriptionView], int]], ...] = (
    (_exporter("nss_chan_subs_last_sent", "gauge", "Last message sent"), lambda s: s.last_sent),
    (
        _exporter("nss_chan_subs_pending_count", "gauge", "Pending message count"),
        lambda s: s.pending_count,
    ),
    (
        _exporter("nss_chan_subs_max_inflight", "gauge", "Max in flight message count"),
        lambda s: s.max_inflight,
    ),
    # stanpkg extras
    (
        _exporter("nss_chan_subs_is_stalled", "gauge", "1 while pending reached max in flight"),
        lambda s: int(s.is_stalled),
    ),
    (
        _exporter(
            "nss_chan_subs_redelivered_pending",
            "gauge",
            "Pending messages that were redelivered at least once",
        ),
        lambda s: s.redelivered_pending,
    ),
)


# -- snapshot (event loop) --------------------------------------------------------------


_NATS_UP = NatsLinkView(True, 0, 0.0, "")


@dataclass(frozen=True)
class MetricsSnapshot:
    server_id: str
    role: str
    info: dict[str, str]  # nss_server_info labels
    active: bool
    totals: ServerTotals
    channels: list[tuple[ChannelView, list[SubscriptionView]]]
    nats_server_pid: int | None = None  # the embedded nats-server, None: external
    nats: NatsLinkView = _NATS_UP


def _is_active(state: str, role: str) -> bool:
    """The server that answers clients: standalone, FT active, or the Raft leader."""
    return state in ("STANDALONE", "FT_ACTIVE") or (state == "CLUSTERED" and role == "Leader")


async def collect(
    view: ServerView, *, version: str, go_version: str, nats_server_pid: int | None = None
) -> MetricsSnapshot:
    """Read everything a scrape shows; yields to the loop between channels."""
    pacer = Pacer()
    channels: list[tuple[ChannelView, list[SubscriptionView]]] = []
    for name in view.channel_names():
        channel = view.channel(name)
        if channel is not None:  # it may have been deleted while we yielded
            channels.append((channel, view.channel_subscriptions(name)))
        await pacer.pause()
    state, role = view.state, view.role
    info = {
        "server_id": view.server_id,
        "cluster_id": view.cluster_id,
        "version": version,
        "go_version": go_version,
        "state": state,
        "role": role,
        "start_time": go_time(view.start_time_ns),
    }
    totals = view.totals([channel for channel, _ in channels])
    active = _is_active(state, role)
    return MetricsSnapshot(
        view.server_id, role, info, active, totals, channels, nats_server_pid, view.nats_link()
    )


# -- rendering (worker thread) ----------------------------------------------------------


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    # Sorted by name, as the Go client prints them.
    return ",".join(f'{name}="{_escape(value)}"' for name, value in sorted(pairs))


class Exposition(NamedTuple):
    """What a scrape answers: the content type and the encoder of prometheus_client's
    registries chosen from the ``Accept`` header."""

    content_type: str
    encode: Callable[[CollectorRegistry], bytes]

    @property
    def openmetrics(self) -> bool:
        return self.content_type.startswith(_OPENMETRICS)


def negotiate(accept: str) -> Exposition:
    """The format the scraper asks for: OpenMetrics, else the text format 0.0.4."""
    encode, content_type = choose_encoder(accept)
    if not content_type.startswith(_OPENMETRICS):
        content_type = CONTENT_TYPE  # ours is 0.0.4 whatever text version was asked
    return Exposition(content_type, encode)


TEXT = negotiate("")


def _header(family: Family, openmetrics: bool = False) -> str:
    name, type_ = family.name, family.type
    if openmetrics:
        if not family.conventional:
            type_ = "unknown"
        elif type_ == "counter":  # an OpenMetrics counter family is named without _total
            name = name.removesuffix("_total")
    return f"# HELP {name} {family.help}\n# TYPE {name} {type_}\n"


def _subscription_labels(server_part: str, channel_part: str, sub: SubscriptionView) -> str:
    """The exporter's label values: booleans as Go's ``FormatBool``; a durable queue
    group's ``<durable>:<group>`` split into ``durable_name`` and ``queue_name``."""
    durable_name, queue_name = sub.durable_name, sub.queue_name
    if sub.is_durable and queue_name:
        durable_name, _, queue_name = queue_name.partition(":")
    # Label names in sorted order (channel < client_id < ... < server_id < server_role),
    # written out for speed: this runs once per subscription.
    return (
        f'{channel_part},client_id="{_escape(sub.client_id)}",'
        f'durable_name="{_escape(durable_name)}",inbox="{_escape(sub.inbox)}",'
        f'is_durable="{"true" if sub.is_durable else "false"}",'
        f'is_offline="{"true" if sub.is_offline else "false"}",'
        f'queue_name="{_escape(queue_name)}",{server_part}'
    )


def _family_text(
    family: Family,
    rows: list[tuple[str, Row]],
    value_of: Callable[[Row], float],
    openmetrics: bool,
) -> Iterator[str]:
    """One family's text in pieces of ``_CHUNK_LINES`` lines: each join/encode is one C
    call holding the GIL, kept short so the event-loop thread gets it back often."""
    name = family.name
    yield _header(family, openmetrics)
    for start in range(0, len(rows), _CHUNK_LINES):
        chunk = rows[start : start + _CHUNK_LINES]
        yield "".join([f"{name}{{{labels}}} {value_of(item)}\n" for labels, item in chunk])


def _render_parts(snapshot: MetricsSnapshot, openmetrics: bool) -> Iterator[str]:
    """The exposition text, piece by piece (encoded and compressed piecewise)."""
    server_label = f'server_id="{_escape(snapshot.server_id)}"'
    totals = snapshot.totals
    for family, value_of in (*SERVER_FAMILIES, *CONVENTIONAL_SERVER_FAMILIES):
        header = _header(family, openmetrics)
        yield f"{header}{family.name}{{{server_label}}} {value_of(totals)}\n"
    active = 1 if snapshot.active else 0
    header = _header(SERVER_ACTIVE, openmetrics)
    yield f"{header}{SERVER_ACTIVE.name}{{{server_label}}} {active}\n"
    for family, nats_value in NATS_FAMILIES:
        header = _header(family, openmetrics)
        yield f"{header}{family.name}{{{server_label}}} {nats_value(snapshot.nats)}\n"
    info = _labels(snapshot.info.items())
    yield f"{_header(SERVER_INFO, openmetrics)}{SERVER_INFO.name}{{{info}}} 1\n"

    server_part = f'{server_label},server_role="{_escape(snapshot.role)}"'
    channel_rows: list[tuple[str, ChannelView]] = []
    sub_rows: list[tuple[str, SubscriptionView]] = []
    for channel, subs in snapshot.channels:
        channel_part = f'channel="{_escape(channel.name)}"'
        channel_rows.append((f"{channel_part},{server_part}", channel))
        sub_rows.extend((_subscription_labels(server_part, channel_part, sub), sub) for sub in subs)
    for family, channel_value in CHANNEL_FAMILIES:
        yield from _family_text(family, channel_rows, channel_value, openmetrics)
    for family, sub_value in SUBSCRIPTION_FAMILIES:
        yield from _family_text(family, sub_rows, sub_value, openmetrics)
    while sub_rows:  # freed a chunk at a time: one big free would hold the GIL
        del sub_rows[-_CHUNK_LINES:]


_PROCESS_REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=_PROCESS_REGISTRY)
PlatformCollector(registry=_PROCESS_REGISTRY)
GCCollector(registry=_PROCESS_REGISTRY)


def _nats_server_registry(pid: int) -> CollectorRegistry:
    """The embedded nats-server's memory and CPU, from its /proc entry (nothing where
    there is none): ``nats_server_process_resident_memory_bytes``,
    ``nats_server_process_cpu_seconds_total`` & co."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(namespace="nats_server", pid=lambda: pid, registry=registry)
    return registry


def _process_metrics(snapshot: MetricsSnapshot, exposition: Exposition) -> bytes:
    # Without its trailing "# EOF": one exposition has one, at the very end.
    ours = exposition.encode(_PROCESS_REGISTRY).removesuffix(_EOF)
    if snapshot.nats_server_pid is None:
        return ours
    child = exposition.encode(_nats_server_registry(snapshot.nats_server_pid))
    return ours + child.removesuffix(_EOF)


_EOF = b"# EOF\n"


def _tail(exposition: Exposition) -> list[bytes]:
    return [_EOF] if exposition.openmetrics else []


def render(snapshot: MetricsSnapshot, exposition: Exposition = TEXT) -> list[bytes]:
    """The body in pieces (written one by one: ~100 MB for 100k subscriptions)."""
    pieces = [part.encode() for part in _render_parts(snapshot, exposition.openmetrics)]
    pieces.append(_process_metrics(snapshot, exposition))
    return pieces + _tail(exposition)


def render_gzip(snapshot: MetricsSnapshot, exposition: Exposition = TEXT) -> list[bytes]:
    """The gzip-compressed body, compressed piece by piece: the uncompressed text never
    exists in one piece."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = _render_parts(snapshot, exposition.openmetrics)
    pieces = [compressor.compress(part.encode()) for part in parts]
    pieces.append(compressor.compress(_process_metrics(snapshot, exposition)))
    pieces.extend(compressor.compress(tail) for tail in _tail(exposition))
    pieces.append(compressor.flush())
    return [piece for piece in pieces if piece]
