"""The JSON documents of ``/streaming/*``: keys, order and omissions as the reference's
structs (monitoring.md §2-§5). Values come from :class:`stanpkg.server.monitoring_views.ServerView`.

Dicts are built in Go struct order (``go_json`` keeps insertion order); Go maps
(``subscriptions`` by channel, per-channel limits) are inserted sorted by key.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from stanpkg.monitor.gojson import go_time, go_uptime
from stanpkg.monitor.pacing import Pacer
from stanpkg.plan.limits import Limits
from stanpkg.server.monitoring_views import ServerView, SubscriptionView

try:
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "Paging",
    "channelsz",
    "channelz",
    "clientsz",
    "clientz",
    "serverz",
    "storez",
    "subscriptionz",
]

DEFAULT_LIST_LIMIT = 1024  # the reference's default page; it has no maximum

Document = dict[str, Any]


@dataclass(frozen=True)
class Paging:
    """``offset``/``limit`` after the reference's defaults (monitoring.md §4.1)."""

    offset: int
    limit: int

    @classmethod
    def of(cls, offset: int, limit: int) -> Paging:
        return cls(max(offset, 0), limit if limit > 0 else DEFAULT_LIST_LIMIT)

    def window(self, total: int) -> tuple[int, int]:
        return min(self.offset, total), min(self.offset + self.limit, total)


def subscriptionz(sub: SubscriptionView) -> Document:
    doc: Document = {"client_id": sub.client_id, "inbox": sub.inbox, "ack_inbox": sub.ack_inbox}
    if sub.durable_name:
        doc["durable_name"] = sub.durable_name
    if sub.queue_name:
        doc["queue_name"] = sub.queue_name
    doc["is_durable"] = sub.is_durable
    doc["is_offline"] = sub.is_offline
    doc["max_inflight"] = sub.max_inflight
    doc["ack_wait"] = sub.ack_wait
    doc["last_sent"] = sub.last_sent
    doc["pending_count"] = sub.pending_count
    doc["is_stalled"] = sub.is_stalled
    return doc


# -- serverz / storez -------------------------------------------------------------------


def _open_fds() -> int:
    """Open descriptors of this process (0 where /proc is missing: the key is omitted).
    The embedded nats-server is a child process: its descriptors are not counted."""
    if not os.path.isdir("/proc/self/fd"):
        return 0
    return len(os.listdir("/proc/self/fd"))


def _max_fds() -> int:
    if resource is None:
        return 0
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 0 if soft == resource.RLIM_INFINITY else soft


def serverz(view: ServerView, *, version: str, go_version: str) -> Document:
    """Raises OSError when the descriptor count cannot be read (the handler's 500)."""
    totals = view.totals()
    now = time.time_ns()
    doc: Document = {
        "cluster_id": view.cluster_id,
        "server_id": view.server_id,
        "version": version,
        "go": go_version,
        "state": view.state,
    }
    if view.role:
        doc["role"] = view.role
    if view.node_id:
        doc["node_id"] = view.node_id
    doc.update(
        now=go_time(now),
        start_time=go_time(view.start_time_ns),
        uptime=go_uptime(view.uptime_seconds),
        clients=totals.clients,
        subscriptions=totals.subscriptions,
        channels=totals.channels,
        total_msgs=totals.total_msgs,
        total_bytes=totals.total_bytes,
        in_msgs=totals.in_msgs,
        in_bytes=totals.in_bytes,
        out_msgs=totals.out_msgs,
        out_bytes=totals.out_bytes,
    )
    open_fds, max_fds = _open_fds(), _max_fds()
    if open_fds:
        doc["open_fds"] = open_fds
    if max_fds:
        doc["max_fds"] = max_fds
    return doc


def _channel_limits(limits: Limits) -> Document:
    return {
        "max_msgs": limits.max_msgs,
        "max_bytes": limits.max_bytes,
        "max_age": limits.max_age,
        "max_subscriptions": limits.max_subs,
        "max_inactivity": limits.max_inactivity,
    }


def storez(view: ServerView) -> Document:
    store_limits = view.store_limits
    defaults = store_limits.defaults
    limits: Document = {"max_channels": store_limits.max_channels}
    limits.update(_channel_limits(defaults))
    if store_limits.channels:
        per_channel = {entry.name: entry.limits for entry in store_limits.channels}
        limits["channels"] = {
            name: _channel_limits(per_channel[name]) for name in sorted(per_channel)
        }
    totals = view.totals()
    return {
        "cluster_id": view.cluster_id,
        "server_id": view.server_id,
        "now": go_time(time.time_ns()),
        "type": view.store_type,
        "limits": limits,
        "total_msgs": totals.total_msgs,
        "total_bytes": totals.total_bytes,
    }


# -- clients ----------------------------------------------------------------------------


def clientz(view: ServerView, client_id: str, with_subs: bool) -> Document | None:
    client = view.client(client_id)
    if client is None:
        return None
    doc: Document = {"id": client.id, "hb_inbox": client.hb_inbox, "subs_count": client.subs_count}
    if with_subs:
        by_channel = view.client_subscriptions(client_id)
        if by_channel:
            doc["subscriptions"] = {
                name: [subscriptionz(sub) for sub in by_channel[name]]
                for name in sorted(by_channel)
            }
    return doc


async def clientsz(view: ServerView, paging: Paging, with_subs: bool) -> Document:
    ids = view.client_ids()
    start, end = paging.window(len(ids))
    now = time.time_ns()
    clients: list[Document] = []
    pacer = Pacer()
    for client_id in ids[start:end]:
        doc = clientz(view, client_id, with_subs)
        if doc is not None:  # it may have gone while we yielded
            clients.append(doc)
        await pacer.pause()
    return {
        "cluster_id": view.cluster_id,
        "server_id": view.server_id,
        "now": go_time(now),
        "offset": paging.offset,
        "limit": paging.limit,
        "count": len(clients),
        "total": len(ids),
        "clients": clients,
    }


# -- channels ---------------------------------------------------------------------------


def channelz(view: ServerView, name: str, with_subs: bool) -> Document | None:
    channel = view.channel(name)
    if channel is None:
        return None
    doc: Document = {
        "name": channel.name,
        "msgs": channel.msgs,
        "bytes": channel.bytes,
        "first_seq": channel.first_seq,
        "last_seq": channel.last_seq,
        "subs_count": channel.subs_count,
    }
    if with_subs:
        subs = view.channel_subscriptions(name)
        if subs:
            doc["subscriptions"] = [subscriptionz(sub) for sub in subs]
    return doc


async def channelsz(view: ServerView, paging: Paging, with_subs: bool) -> Document:
    """Names only, or (``subs=1``) whole channels with their subscriptions."""
    names = view.channel_names()
    start, end = paging.window(len(names))
    now = time.time_ns()
    doc: Document = {
        "cluster_id": view.cluster_id,
        "server_id": view.server_id,
        "now": go_time(now),
        "offset": paging.offset,
        "limit": paging.limit,
    }
    page = names[start:end]
    if not with_subs:
        doc.update(count=len(page), total=len(names))
        if page:
            doc["names"] = page
        return doc
    channels: list[Document] = []
    pacer = Pacer()
    for name in page:
        channel = channelz(view, name, True)
        if channel is not None:
            channels.append(channel)
        await pacer.pause()
    doc.update(count=len(channels), total=len(names))
    if channels:
        doc["channels"] = channels
    return doc
