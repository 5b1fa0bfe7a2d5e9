"""The bytes the clustered store keeps in JetStream (their names and keys: ``layout``).

Records (the KV bucket ``layout.records_bucket``), each a (key, value) pair:

* ``server``: the server info, a serialized ``spb.ServerInfo``;
* ``client.<client ID>``: a serialized ``spb.ClientInfo``;
* ``channel.<channel>``: empty, the channel exists (its messages are in its stream);
* ``sub.<channel>.<sub ID>``: a serialized ``spb.SubscriptionSnapshot``, the
  subscription's ``SubState`` and its pending (sent, unacknowledged) sequences.

Messages (a channel's stream, ``layout.stream_name``): the stream message's data is the
published payload, as published; STAN's own fields are headers: ``Nats-Msg-Id`` = the
publish GUID (JetStream answers a resend within the duplicate window with the original
sequence), ``Stan-Reply``, ``Stan-Timestamp`` (ns). STAN sequence = stream sequence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, ServerInfo, SubRecord
from stanpkg.stores.jetstream.layout import (
    SERVER_KEY,
    channel_key,
    client_key,
    kv_key_parts,
    sub_key,
)
from stanpkg.stores.records import (
    client_from_proto,
    client_to_proto,
    server_info_from_proto,
    server_info_to_proto,
    sub_from_proto,
    sub_to_proto,
)
from stanpkg.transport.connection import decode_headers

__all__ = [
    "HEADER_EXPECTED_LAST",
    "HEADER_MSG_ID",
    "HEADER_REPLY",
    "HEADER_TIMESTAMP",
    "ClusterRecords",
    "StoredSubscription",
    "Write",
    "atomic_batch_messages",
    "batch_headers",
    "channel_record",
    "client_record",
    "decode_records",
    "from_stream_message",
    "message_guid",
    "server_record",
    "subscription_channel",
    "subscription_record",
    "to_stream_message",
]

HEADER_MSG_ID = "Nats-Msg-Id"
HEADER_EXPECTED_LAST = "Nats-Expected-Last-Sequence"
HEADER_REPLY = "Stan-Reply"
HEADER_TIMESTAMP = "Stan-Timestamp"
_BREAKS_HEADER = re.compile(r"[\r\n]")

# (sequence, guid, reply, timestamp (ns), payload): one write of a channel's message
Write = tuple[int, str, str, int, bytes]

# -- records -------------------------------------------------------------------------------


def server_record(info: ServerInfo) -> tuple[str, bytes]:
    """(key, value) of the server info."""
    return SERVER_KEY, server_info_to_proto(info).SerializeToString()


def client_record(record: ClientRecord) -> tuple[str, bytes]:
    """(key, value) of a client."""
    return client_key(record.id), client_to_proto(record).SerializeToString()


def channel_record(channel: str) -> tuple[str, bytes]:
    """(key, value) of a channel: the value is empty."""
    return channel_key(channel), b""


def subscription_record(
    channel: str, record: SubRecord, pending: Iterable[int]
) -> tuple[str, bytes]:
    """(key, value) of a subscription with its pending sequences (stored sorted)."""
    snapshot = spb.SubscriptionSnapshot(State=sub_to_proto(record), AcksPending=sorted(pending))
    return sub_key(channel, record.id), snapshot.SerializeToString()


def subscription_channel(key: str) -> str | None:
    """The channel of a subscription's record by its key; None for another record."""
    kind, *rest = kv_key_parts(key)
    return rest[0] if kind == "sub" and rest else None


@dataclass(frozen=True)
class StoredSubscription:
    record: SubRecord
    pending: list[int]  # sorted


@dataclass
class ClusterRecords:
    """The records of a cluster, decoded: clients in the order of the records, channel
    names sorted, each channel's subscriptions sorted by ID."""

    info: ServerInfo
    clients: list[ClientRecord] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    subs: dict[str, list[StoredSubscription]] = field(default_factory=dict)


def decode_records(records: Mapping[str, bytes]) -> ClusterRecords | None:
    """The records read from the bucket, decoded; None without a server info (the
    serving node writes it last: a cluster whose state was never written)."""
    raw_info = records.get(SERVER_KEY)
    if raw_info is None:
        return None
    decoded = ClusterRecords(server_info_from_proto(spb.ServerInfo.FromString(raw_info)))
    for key, value in records.items():
        kind, *rest = kv_key_parts(key)
        if kind == "client":
            decoded.clients.append(client_from_proto(spb.ClientInfo.FromString(value)))
        elif kind == "channel":
            decoded.channels.append(rest[0])
        elif kind == "sub":
            snapshot = spb.SubscriptionSnapshot.FromString(value)
            sub = StoredSubscription(sub_from_proto(snapshot.State), sorted(snapshot.AcksPending))
            decoded.subs.setdefault(rest[0], []).append(sub)
    decoded.channels.sort()
    for subs in decoded.subs.values():
        subs.sort(key=lambda sub: sub.record.id)
    return decoded


# -- messages ------------------------------------------------------------------------------


def to_stream_message(
    guid: str,
    reply: str,
    timestamp_ns: int,
    payload: bytes,
    *,
    expected_last: int | None = None,
    batch: str = "",
) -> tuple[bytes, bytes]:
    """(header block, data) of one channel message; ``batch``: its atomic batch headers
    (:func:`batch_headers`)."""
    if _BREAKS_HEADER.search(guid) or _BREAKS_HEADER.search(reply):
        raise ValueError(f"a line break in the publish ID {guid!r} or reply {reply!r}")
    # One format per message on the hot path, not encode_headers' checks per field.
    block = f"NATS/1.0\r\n{HEADER_MSG_ID}: {guid}\r\n{HEADER_TIMESTAMP}: {timestamp_ns}\r\n"
    if reply:
        block += f"{HEADER_REPLY}: {reply}\r\n"
    if expected_last is not None:
        block += f"{HEADER_EXPECTED_LAST}: {expected_last}\r\n"
    return (block + batch + "\r\n").encode(), payload


def atomic_batch_messages(batch: Sequence[Write], batch_id: str) -> list[tuple[bytes, bytes]]:
    """(header block, data) of each write of an atomic batch: :func:`to_stream_message`
    with :func:`batch_headers`, byte for byte, formatted in one pass (the first write
    expects its predecessor; the checks for line breaks run once over the batch)."""
    fields = "".join(f"{guid}{reply}" for _, guid, reply, _, _ in batch)
    if _BREAKS_HEADER.search(fields):
        for _, guid, reply, timestamp, payload in batch:
            to_stream_message(guid, reply, timestamp, payload)  # raises for the bad one
    count = len(batch)
    head = f"NATS/1.0\r\n{HEADER_MSG_ID}: "
    stamp = f"\r\n{HEADER_TIMESTAMP}: "
    batch_line = f"Nats-Batch-Id: {batch_id}\r\nNats-Batch-Sequence: "
    out = []
    for index, (sequence, guid, reply, timestamp, payload) in enumerate(batch, 1):
        block = f"{head}{guid}{stamp}{timestamp}\r\n"
        if reply:
            block += f"{HEADER_REPLY}: {reply}\r\n"
        if index == 1:
            block += f"{HEADER_EXPECTED_LAST}: {sequence - 1}\r\n"
        block += f"{batch_line}{index}\r\n"
        if index == count:
            block += "Nats-Batch-Commit: 1\r\n"
        out.append(((block + "\r\n").encode(), payload))
    return out


def batch_headers(batch_id: str, index: int, count: int) -> str:
    """The atomic batch header lines of message ``index`` (from 0) of ``count``."""
    lines = f"Nats-Batch-Id: {batch_id}\r\nNats-Batch-Sequence: {index + 1}\r\n"
    if index == count - 1:
        lines += "Nats-Batch-Commit: 1\r\n"
    return lines


def from_stream_message(sequence: int, headers: bytes, data: bytes, *, channel: str) -> bytes:
    """The serialized MsgProto of a stream message."""
    _, fields = decode_headers(headers)
    return pb.MsgProto(
        sequence=sequence,
        subject=channel,
        reply=fields.get(HEADER_REPLY, ""),
        data=data,
        timestamp=int(fields.get(HEADER_TIMESTAMP) or 0),
    ).SerializeToString()


def message_guid(headers: bytes) -> str:
    """The publish ID of a stream message (empty when it has none)."""
    return decode_headers(headers)[1].get(HEADER_MSG_ID, "")
