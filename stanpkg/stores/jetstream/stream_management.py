"""Managing the streams of a cluster through our own NATS client: a shared stream's
configuration (:func:`shared_stream_config`), its creation or update
(:func:`ensure_stream`), purges of a channel's subject (:func:`purge_subject`), deletion,
and where a stream's replicas and leader are (:func:`stream_replicas`,
:func:`current_servers`, :func:`lead_stream_from`, :func:`remove_stream_peer`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import (
    API_TIMEOUT,
    ASK_AGAIN_EVERY,
    STREAM_NAME_IN_USE,
    STREAM_NOT_FOUND,
    api_failure,
    first_answer,
    js_api,
)
from stanpkg.stores.jetstream.layout import shared_stream_name, shared_stream_subjects
from stanpkg.stores.jetstream.stream_reader import StreamState, state_of
from stanpkg.transport.connection import NatsConnection

__all__ = [
    "current_servers",
    "delete_stream",
    "ensure_stream",
    "lead_stream_from",
    "move_stream_subjects",
    "purge_subject",
    "remove_stream_peer",
    "shared_stream_config",
    "stream_replicas",
]

DUPLICATE_WINDOW_NS = 120 * 10**9
# The configuration fields brought to the wanted ones when a stream exists already.
_KEPT_FIELDS = (
    "max_msgs",
    "max_bytes",
    "max_age",
    "max_msgs_per_subject",
    "duplicate_window",
    "discard",
    "allow_direct",
    "allow_atomic",
)


def shared_stream_config(cluster_id: str, index: int, *, replicas: int) -> dict[str, Any]:
    """The JSON configuration of shared stream ``index`` (JetStream: -1 = unlimited, ns).

    No stream-wide limit: each channel's limits are the serving node's, which purges
    what a channel drops (``purge_subject``). Atomic batches carry every write (one
    answer per batch, all or nothing; servers before 2.12 drop the field, which
    ``shared_streams`` refuses), direct gets let any replica answer reads."""
    return {
        "name": shared_stream_name(cluster_id, index),
        "description": f"STAN channels of cluster {cluster_id} (shared stream {index})",
        "subjects": [shared_stream_subjects(cluster_id, index)],
        "retention": "limits",
        "storage": "file",
        "discard": "old",
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msgs_per_subject": -1,
        "num_replicas": replicas,
        "duplicate_window": DUPLICATE_WINDOW_NS,
        "allow_direct": True,
        "allow_atomic": True,
    }


async def purge_subject(conn: NatsConnection, stream: str, subject: str, below: int) -> None:
    """Remove the messages of ``subject`` stored below stream sequence ``below`` (all of
    them when ``below`` is past the subject's last: its last subject sequence is then 0)."""
    answer = await js_api(conn, f"STREAM.PURGE.{stream}", {"filter": subject, "seq": below})
    if "error" in answer:
        raise api_failure(f"purge {subject} of stream {stream} below {below}", answer)


async def move_stream_subjects(conn: NatsConnection, stream: str, subjects: list[str]) -> None:
    """Give an existing stream other subjects (its messages stay as they are)."""
    answer = await js_api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise api_failure(f"read stream {stream}", answer)
    config = dict(answer["config"])
    if config.get("subjects") == subjects:
        return
    config["subjects"] = subjects
    answer = await js_api(conn, f"STREAM.UPDATE.{stream}", config)
    if "error" in answer:
        raise api_failure(f"change the subjects of stream {stream}", answer)


async def ensure_stream(
    conn: NatsConnection, config: dict[str, Any], *, leader_timeout: float = API_TIMEOUT
) -> StreamState:
    """Create the stream, or bring an existing one's limits to ``config``; its state.

    After a serving node's death the stream's leader, JetStream's metadata leader, or both
    may be electing for 4-9 s. A create and a read are sent at once, again every
    ASK_AGAIN_EVERY seconds for ``leader_timeout`` (a server just elected answers only
    what comes after its election), and the first answer that settles it is taken: for a
    stream that exists, only its leader's (see :func:`_create_or_read`)."""
    name = config["name"]
    try:
        kind, answer = await first_answer(
            lambda: _create_or_read(conn, config),
            timeout=leader_timeout,
            every=ASK_AGAIN_EVERY,
            woken_by=conn,
        )
    except TimeoutError:
        raise StoreError(f"JetStream did not answer for stream {name} (create or info)") from None
    if kind == "created":
        return state_of(answer)
    if kind == "refused":
        raise api_failure(f"create stream {name}", answer)
    if kind == "unreadable":
        raise api_failure(f"read stream {name}", answer)
    current = dict(answer["config"])  # it exists: its settings brought to config's
    wanted = current | {field: config[field] for field in _KEPT_FIELDS if field in config}
    if wanted == current:
        return state_of(answer)
    answer = await js_api(conn, f"STREAM.UPDATE.{name}", wanted)
    if "error" in answer:
        raise api_failure(f"update stream {name}", answer)
    return state_of(answer)


async def _create_or_read(
    conn: NatsConnection, config: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The first answer that settles whether and how the stream exists: ("created",
    answer) when the create made the stream, ("refused", answer) when it failed for another
    reason than an existing stream, ("exists", info) when the stream's leader answered its
    info, ("unreadable", info) when the info failed for another reason than a missing
    stream. StoreError when neither settles it (no answer, or an info that says "not
    found" and a create that says "exists with another configuration" or does not answer).

    A create of a stream that exists with this configuration is answered, also while the
    stream elects a leader after a node's death, from one replica's local state; that
    replica may not have applied the last writes yet (its leader died before telling it
    they were committed), so the answer can show an empty stream that holds messages.
    Only the stream leader's info is taken for an existing stream; the create settles
    only when it made the stream (``did_create``, or, from a server that does not say,
    when the info found no stream)."""
    name = config["name"]
    create = asyncio.ensure_future(js_api(conn, f"STREAM.CREATE.{name}", config))
    info = asyncio.ensure_future(js_api(conn, f"STREAM.INFO.{name}", None))
    created: dict[str, Any] | None = None  # a create answered without did_create
    missing = False  # the info said there is no such stream
    try:
        pending: set[asyncio.Future[dict[str, Any]]] = {create, info}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if info in done and info.exception() is None:
                answer = info.result()
                error = answer.get("error")
                if not error:
                    return "exists", answer
                if error.get("err_code") != STREAM_NOT_FOUND:
                    return "unreadable", answer
                missing = True
            if create in done and create.exception() is None:
                answer = create.result()
                error = answer.get("error")
                if error and error.get("err_code") != STREAM_NAME_IN_USE:
                    return "refused", answer
                if not error:
                    if answer.get("did_create"):
                        return "created", answer
                    created = answer
            if missing and created is not None:
                return "created", created
        raise StoreError(f"JetStream did not settle whether stream {name} exists")
    finally:
        create.cancel()
        info.cancel()


async def stream_replicas(conn: NatsConnection, stream: str) -> list[str]:
    """The JetStream servers (names) holding a replica of the stream, leader first."""
    answer = await js_api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise api_failure(f"read stream {stream}", answer)
    cluster = answer.get("cluster", {})
    names = [cluster["leader"]] if cluster.get("leader") else []
    return names + [str(peer.get("name", "")) for peer in cluster.get("replicas", ())]


async def current_servers(
    conn: NatsConnection, stream: str, *, timeout: float = API_TIMEOUT
) -> set[str]:
    """The JetStream servers (names) that could lead the stream at once: its leader, and
    the followers whose replica JetStream reports current."""
    answer = await js_api(conn, f"STREAM.INFO.{stream}", None, timeout=timeout)
    if "error" in answer:
        raise api_failure(f"read stream {stream}", answer)
    cluster = answer.get("cluster", {})
    names = {str(cluster["leader"])} if cluster.get("leader") else set()
    return names | {str(p.get("name")) for p in cluster.get("replicas", ()) if p.get("current")}


async def lead_stream_from(
    conn: NatsConnection, stream: str, server: str, *, ask: bool = True
) -> str:
    """Ask the stream's leader to hand its leadership to JetStream server ``server`` when
    another server leads it and ``server``'s replica is current: "asked"; "here" when
    ``server`` leads it, "not now" when it has no leader or no current replica there (or
    when ``ask`` is false: a move asked before may be under way)."""
    answer = await js_api(conn, f"STREAM.INFO.{stream}", None)
    if "error" in answer:
        raise api_failure(f"read stream {stream}", answer)
    cluster = answer.get("cluster", {})
    leader = cluster.get("leader")
    if leader == server:
        return "here"
    replicas = cluster.get("replicas", ())
    if not leader or not any(p.get("name") == server and p.get("current") for p in replicas):
        return "not now"  # electing, no replica here, or one still catching up
    if not ask:
        return "not now"
    request = {"placement": {"preferred": server}}
    answer = await js_api(conn, f"STREAM.LEADER.STEPDOWN.{stream}", request)
    if "error" in answer:
        raise api_failure(f"move the leadership of {stream} to {server}", answer)
    return "asked"


async def remove_stream_peer(conn: NatsConnection, stream: str, server: str) -> None:
    """Move the stream's replica off JetStream server ``server`` (to a server that has
    none; StoreError when there is no such server)."""
    request = {"peer": server}
    answer = await js_api(conn, f"STREAM.PEER.REMOVE.{stream}", request)
    if "error" in answer:
        raise api_failure(f"move the replica of {stream} off {server}", answer)


async def delete_stream(conn: NatsConnection, name: str) -> None:
    """Delete the stream; one that does not exist is no error."""
    answer = await js_api(conn, f"STREAM.DELETE.{name}", None)
    error = answer.get("error")
    if error and error.get("err_code") != STREAM_NOT_FOUND:
        raise api_failure(f"delete stream {name}", answer)
