"""The bytes the clustered store keeps in JetStream (their names and keys: ``layout``).

Records (the KV bucket ``layout.records_bucket``), each a (key, value) pair:

* ``server``: the server info, a serialized ``spb.ServerInfo``;
* ``client.<client ID>``: a serialized ``spb.ClientInfo``;
* ``channel.<channel>``: ``{"stream": k}``, the channel's shared stream (layout 1 wrote
  an empty value: a channel of its own stream, converted by ``conversion``);
* ``state.<channel>``: ``{"msgs": n, "bytes": b, "first": f, "last": l}``, the channel's
  figures as the serving node last had them (monitoring on the followers; and where a
  channel whose messages are all gone continues);
* ``sub.<channel>.<sub ID>``: a serialized ``spb.SubscriptionSnapshot``, the
  subscription's ``SubState`` and its pending (sent, unacknowledged) sequences;
* ``layout``: ``{"version": 2, "channel_streams": N}``, the layout and the number of
  streams new channels are spread over.

Messages (a channel's subject of its shared stream, ``layout.channel_subject``), in one of
two forms, read alike:

* one STAN message: the stream message's data is the published payload, as published;
  STAN's own fields are headers: ``Stan-Sequence`` (the channel's sequence),
  ``Stan-Timestamp`` (ns), ``Stan-Reply``, and ``Stan-Guid`` = the publish GUID, or the
  writer's own ID when the publisher gave none. Messages written by early releases carry
  the GUID in ``Nats-Msg-Id`` (read as well). It is a plain header, not JetStream's
  deduplication: the per-channel fence already refuses a write sent again, the serving
  node deduplicates resends by GUID itself, and JetStream's duplicate tracking cost a
  fifth of its write rate (bench/cluster/jetstream_floor.py);
* a pack (layout 3, written when ``cluster.pack_bytes`` is set): ``Stan-Count``
  consecutive messages from ``Stan-Sequence``, their payloads, timestamps, replies and
  GUIDs in one ``spb.MessagePack``, and ``Stan-Guid`` the last one's GUID. Why: JetStream's
  work, on each of the three servers, is per stream message, and it is most of a
  cluster's CPU per STAN message; a flush of small messages packed into one stream message
  costs a third less CPU in all (bench/cluster/cluster_bench.py). A flush is cut into
  packs of at most ``pack_bytes``; a message alone in its pack is written in the first
  form. Not the default: a plain JetStream client reads the first form as published.

The first message of a write expects the channel's last stream sequence
(``Nats-Expected-Last-Subject-Sequence``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from stanpkg.plan.options import int_default
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, ServerInfo, StoreError, SubRecord
from stanpkg.stores.jetstream.layout import (
    LAYOUT_KEY,
    LAYOUT_VERSION,
    PLAIN_LAYOUT_VERSION,
    READABLE_LAYOUTS,
    SERVER_KEY,
    channel_key,
    client_key,
    kv_key_parts,
    state_key,
    sub_key,
)
from stanpkg.stores.record_protos import (
    client_from_proto,
    client_to_proto,
    server_info_from_proto,
    server_info_to_proto,
    sub_from_proto,
    sub_to_proto,
)
from stanpkg.transport.connection import decode_headers

__all__ = [
    "HEADER_COUNT",
    "HEADER_EXPECTED_LAST_SUBJECT",
    "HEADER_GUID",
    "HEADER_MSG_ID",
    "HEADER_REPLY",
    "HEADER_SEQUENCE",
    "HEADER_TIMESTAMP",
    "PACK_BYTES",
    "ChannelMessage",
    "ChannelState",
    "ClusterRecords",
    "Layout",
    "StoredSubscription",
    "Write",
    "atomic_batch_messages",
    "channel_record",
    "client_record",
    "decode_channels",
    "decode_layout",
    "decode_message",
    "decode_messages",
    "decode_records",
    "decode_states",
    "decode_stream_messages",
    "layout_record",
    "message_span",
    "pack_runs",
    "packed_batch_messages",
    "server_record",
    "state_record",
    "subscription_channel",
    "subscription_record",
]

HEADER_MSG_ID = "Nats-Msg-Id"
HEADER_EXPECTED_LAST_SUBJECT = "Nats-Expected-Last-Subject-Sequence"
HEADER_SEQUENCE = "Stan-Sequence"
HEADER_REPLY = "Stan-Reply"
HEADER_TIMESTAMP = "Stan-Timestamp"
HEADER_GUID = "Stan-Guid"  # the (last) message's publish GUID (not deduplicated)
HEADER_COUNT = "Stan-Count"  # the messages of a pack (none: one message)
PACK_BYTES = int_default("cluster.pack_bytes")  # a pack's size at most (0: no packs)
PACK_ENTRY_OVERHEAD = 16  # bytes a message costs in a pack beyond its fields
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


def channel_record(channel: str, stream: int) -> tuple[str, bytes]:
    """(key, value) of a channel kept in shared stream ``stream``."""
    return channel_key(channel), json.dumps({"stream": stream}).encode()


def layout_record(streams: int, *, packs: bool = False) -> tuple[str, bytes]:
    """(key, value) of the layout: this release's, new channels spread over ``streams``;
    ``packs``: the streams may hold packs (version 3, else 2)."""
    version = LAYOUT_VERSION if packs else PLAIN_LAYOUT_VERSION
    return LAYOUT_KEY, json.dumps({"version": version, "channel_streams": streams}).encode()


@dataclass(frozen=True, slots=True)
class ChannelState:
    """A channel's figures as its message store has them (first 0: never a message;
    last + 1 once every message is gone)."""

    msgs: int = 0
    bytes: int = 0
    first: int = 0
    last: int = 0


def state_record(channel: str, state: ChannelState) -> tuple[str, bytes]:
    """(key, value) of a channel's figures."""
    value = {"msgs": state.msgs, "bytes": state.bytes, "first": state.first, "last": state.last}
    return state_key(channel), json.dumps(value).encode()


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


@dataclass(frozen=True)
class Layout:
    """The ``layout`` record."""

    version: int
    channel_streams: int


@dataclass
class ClusterRecords:
    """The records of a cluster, decoded: clients in the order of the records; channels
    by name (sorted), each with its shared stream (None: a layout-1 channel, in a stream
    of its own); each channel's subscriptions sorted by ID."""

    info: ServerInfo
    clients: list[ClientRecord] = field(default_factory=list)
    channels: dict[str, int | None] = field(default_factory=dict)
    states: dict[str, ChannelState] = field(default_factory=dict)
    subs: dict[str, list[StoredSubscription]] = field(default_factory=dict)
    layout: Layout | None = None

    @property
    def legacy(self) -> list[str]:
        """The channels still in layout 1, sorted."""
        return [name for name, stream in self.channels.items() if stream is None]


def decode_records(records: Mapping[str, bytes]) -> ClusterRecords | None:
    """The records read from the bucket, decoded; None without a server info (the
    serving node writes it first: a cluster whose state was never written). StoreError
    for a layout this release does not know (a later release's): never misread."""
    raw_info = records.get(SERVER_KEY)
    if raw_info is None:
        return None
    decoded = ClusterRecords(server_info_from_proto(spb.ServerInfo.FromString(raw_info)))
    decoded.layout = decode_layout(records.get(LAYOUT_KEY))
    decoded.channels = decode_channels(records)
    decoded.states = decode_states(records)
    for key, value in records.items():
        kind, *rest = kv_key_parts(key)
        if kind == "client":
            decoded.clients.append(client_from_proto(spb.ClientInfo.FromString(value)))
        elif kind == "sub" and rest:
            snapshot = spb.SubscriptionSnapshot.FromString(value)
            sub = StoredSubscription(sub_from_proto(snapshot.State), sorted(snapshot.AcksPending))
            decoded.subs.setdefault(rest[0], []).append(sub)
    for subs in decoded.subs.values():
        subs.sort(key=lambda sub: sub.record.id)
    return decoded


def decode_channels(records: Mapping[str, bytes]) -> dict[str, int | None]:
    """Every channel of the records by name (sorted), with its shared stream (None for a
    channel of layout 1)."""
    channels: dict[str, int | None] = {}
    for key, value in records.items():
        kind, *rest = kv_key_parts(key)
        if kind == "channel" and rest:
            channels[rest[0]] = _channel_stream(key, value)
    return dict(sorted(channels.items()))


def decode_states(records: Mapping[str, bytes]) -> dict[str, ChannelState]:
    """Every channel's figures of the records, by name."""
    states: dict[str, ChannelState] = {}
    for key, value in records.items():
        kind, *rest = kv_key_parts(key)
        if kind == "state" and rest:
            states[rest[0]] = _channel_state(key, value)
    return states


def decode_layout(value: bytes | None) -> Layout | None:
    """The ``layout`` record (None when there is none: layout 1, or a new cluster)."""
    if value is None:
        return None
    try:
        document = json.loads(value)
        layout = Layout(int(document["version"]), int(document["channel_streams"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"unreadable layout record {value[:80]!r}: {exc}") from None
    if layout.version not in READABLE_LAYOUTS:
        raise StoreError(
            f"the cluster's state is in layout {layout.version}; this release reads layouts "
            f"{' and '.join(map(str, READABLE_LAYOUTS))} (and converts layout 1): run the "
            "release that wrote it"
        )
    return layout


def _channel_stream(key: str, value: bytes) -> int | None:
    if not value:
        return None  # layout 1
    try:
        stream = int(json.loads(value)["stream"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"unreadable record {key!r}: {value[:80]!r} ({exc})") from None
    if stream < 0:
        raise StoreError(f"unreadable record {key!r}: {value[:80]!r}")
    return stream


def _channel_state(key: str, value: bytes) -> ChannelState:
    try:
        document = json.loads(value)
        return ChannelState(
            int(document["msgs"]), int(document["bytes"]), int(document["first"]),
            int(document["last"]),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"unreadable record {key!r}: {value[:80]!r} ({exc})") from None


# -- messages ------------------------------------------------------------------------------


def atomic_batch_messages(
    batch: Sequence[Write], batch_id: str, expected_last: int, *, guid_header: str = HEADER_GUID
) -> list[tuple[bytes, bytes]]:
    """(header block, data) of each write of an atomic batch to one channel's subject, one
    stream message each: :func:`packed_batch_messages` without packs."""
    return packed_batch_messages(
        batch, [1] * len(batch), batch_id, expected_last, guid_header=guid_header
    )


def pack_runs(batch: Sequence[Write], pack_bytes: int) -> list[int]:
    """How many consecutive writes of ``batch`` go in each stream message: as many as fit
    in ``pack_bytes`` (payload, GUID, reply and an entry's overhead); one larger alone."""
    runs: list[int] = []
    count = size = 0
    for _, guid, reply, _, payload in batch:
        entry = len(payload) + len(guid) + len(reply) + PACK_ENTRY_OVERHEAD
        if count and size + entry > pack_bytes:
            runs.append(count)
            count = size = 0
        count += 1
        size += entry
    if count:
        runs.append(count)
    return runs


def packed_batch_messages(
    batch: Sequence[Write],
    runs: Sequence[int],
    batch_id: str,
    expected_last: int,
    *,
    guid_header: str = HEADER_GUID,
) -> list[tuple[bytes, bytes]]:
    """(header block, data) of each stream message of an atomic batch to one channel's
    subject: the writes of ``batch`` in runs of ``runs`` (:func:`pack_runs`), a run of one
    as one message, a longer one as a pack. The first expects the channel's last message
    at stream sequence ``expected_last`` (0: none), the last commits the batch.
    ``guid_header``: where a lone message's publish ID goes (:data:`HEADER_MSG_ID` only
    to test what JetStream does with it). ValueError for a publish ID or reply with a
    line break (it would forge headers)."""
    _check_header_fields(batch)
    if not batch:
        return []
    # One f-string per stream message (this runs for every message a cluster stores); the
    # first and the last get their extra line before the blank line that ends a block.
    batch_line = f"\r\nNats-Batch-Id: {batch_id}\r\nNats-Batch-Sequence: "
    blocks: list[str] = []
    datas: list[bytes] = []
    start = 0
    for index, count in enumerate(runs, 1):
        if count == 1:
            sequence, guid, reply, timestamp, payload = batch[start]
            blocks.append(
                f"NATS/1.0\r\n{HEADER_SEQUENCE}: {sequence}\r\n{HEADER_TIMESTAMP}: {timestamp}"
                f"{_line(guid_header, guid)}{_line(HEADER_REPLY, reply)}{batch_line}{index}"
                "\r\n\r\n"
            )
            datas.append(payload)
        else:
            run = batch[start : start + count]
            sequence, guid = run[0][0], run[-1][1]
            blocks.append(
                f"NATS/1.0\r\n{HEADER_SEQUENCE}: {sequence}\r\n{HEADER_COUNT}: {count}"
                f"{_line(HEADER_GUID, guid)}{batch_line}{index}\r\n\r\n"
            )
            datas.append(
                spb.MessagePack(
                    Data=[write[4] for write in run],
                    Timestamps=[write[3] for write in run],
                    Replies=[write[2] for write in run],
                    Guids=[write[1] for write in run],
                ).SerializeToString()
            )
        start += count
    blocks[0] = f"{blocks[0][:-2]}{HEADER_EXPECTED_LAST_SUBJECT}: {expected_last}\r\n\r\n"
    blocks[-1] = f"{blocks[-1][:-2]}Nats-Batch-Commit: 1\r\n\r\n"
    return [(block.encode(), data) for block, data in zip(blocks, datas, strict=True)]


def _line(name: str, value: str) -> str:
    return f"\r\n{name}: {value}" if value else ""


def _check_header_fields(batch: Sequence[Write]) -> None:
    """ValueError for a publish ID or reply with a line break (it would forge headers)."""
    fields = "".join(f"{guid}{reply}" for _, guid, reply, _, _ in batch)
    if _BREAKS_HEADER.search(fields):
        for _, guid, reply, _, _ in batch:
            if _BREAKS_HEADER.search(guid) or _BREAKS_HEADER.search(reply):
                raise ValueError(f"a line break in the publish ID {guid!r} or reply {reply!r}")


class ChannelMessage(NamedTuple):
    """A channel's message as stored: its STAN sequence, its serialized MsgProto, its
    publish ID ("" for none) and timestamp (ns)."""

    sequence: int
    record: bytes
    guid: str
    timestamp: int


def decode_message(channel: str, fields: Mapping[str, str], data: bytes) -> ChannelMessage:
    """A stream message of ``channel`` from its decoded headers (``decode_headers``) and
    data. StoreError when it has no STAN sequence (not written by this layout)."""
    try:
        sequence = int(fields[HEADER_SEQUENCE])
    except (KeyError, ValueError):
        raise StoreError(f"a message of channel {channel!r} without {HEADER_SEQUENCE}") from None
    timestamp = int(fields.get(HEADER_TIMESTAMP) or 0)
    record = pb.MsgProto(
        sequence=sequence,
        subject=channel,
        reply=fields.get(HEADER_REPLY, ""),
        data=data,
        timestamp=timestamp,
    ).SerializeToString()
    guid = fields.get(HEADER_GUID) or fields.get(HEADER_MSG_ID, "")
    return ChannelMessage(sequence, record, guid, timestamp)


def message_span(fields: Mapping[str, str]) -> tuple[int, int]:
    """(first STAN sequence, count) of a stream message of a channel, from its decoded
    headers. StoreError when it has none (not written by this layout)."""
    try:
        first = int(fields[HEADER_SEQUENCE])
        count = int(fields.get(HEADER_COUNT) or 1)
    except (KeyError, ValueError):
        raise StoreError(f"a channel message without {HEADER_SEQUENCE}") from None
    if first < 1 or count < 1:
        raise StoreError(f"a channel message with {HEADER_SEQUENCE} {first} of {count}")
    return first, count


def decode_messages(channel: str, fields: Mapping[str, str], data: bytes) -> list[ChannelMessage]:
    """The STAN messages of one stream message of ``channel`` (one, or a pack's), from
    its decoded headers and data. StoreError for a stream message this layout did not
    write, or a damaged pack."""
    if HEADER_COUNT not in fields:
        return [decode_message(channel, fields, data)]
    first, count = message_span(fields)
    try:
        pack = spb.MessagePack.FromString(data)
    except Exception as exc:  # protobuf's DecodeError, whatever the backend
        raise StoreError(f"a damaged pack of channel {channel!r} at {first}: {exc}") from None
    columns = (pack.Data, pack.Timestamps, pack.Replies, pack.Guids)
    if any(len(column) != count for column in columns):
        raise StoreError(f"a damaged pack of channel {channel!r} at {first}: not {count} messages")
    return [
        ChannelMessage(
            sequence,
            pb.MsgProto(
                sequence=sequence, subject=channel, reply=reply, data=payload, timestamp=stamp
            ).SerializeToString(),
            guid,
            stamp,
        )
        for sequence, payload, stamp, reply, guid in zip(
            range(first, first + count), *columns, strict=True
        )
    ]


def decode_stream_messages(channel: str, headers: bytes, data: bytes) -> list[ChannelMessage]:
    """:func:`decode_messages` of a raw header block."""
    return decode_messages(channel, decode_headers(headers)[1], data)
