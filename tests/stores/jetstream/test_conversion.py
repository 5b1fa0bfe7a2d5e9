"""A cluster in layout 1 (a stream per channel) converted to the shared streams by the node
that takes the lease: on a cluster written by the stream-per-channel release itself
(fixtures/layout1.tar.gz, made by fixtures/make_layout1.py), every message, sequence and
durable position is served as before; a conversion stopped anywhere — the process killed
mid-copy, or a failure between its steps — is completed by the next run, without a message
copied twice or skipped."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import nats
import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ServerInfo, SubRecord
from stanpkg.stores.jetstream import conversion as conversion_module
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.connection import js_api
from stanpkg.stores.jetstream.layout import (
    DEFAULT_CHANNEL_STREAMS,
    LAYOUT_KEY,
    PLAIN_LAYOUT_VERSION,
    channel_key,
    channel_stream_index,
    channel_subject,
    legacy_stream_name,
    records_bucket,
    shared_stream_name,
)
from stanpkg.stores.jetstream.record_codec import (
    ChannelMessage,
    decode_messages,
    decode_records,
    message_span,
)
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.stores.jetstream.stream_reader import (
    find_stream_state,
    last_of_subject,
    read_subject,
)
from stanpkg.transport.connection import NatsConnection, decode_headers
from stanpkg.transport.endpoint import NatsEndpoint
from tests.cluster.conftest import READY, Cluster, cluster  # noqa: F401 - fixture
from tests.server.conftest import LogCapture, new_cluster_id
from tests.server.stan_client import StanClient
from tests.stores.jetstream.conftest import stop_nats
from tests.stores.jetstream.legacy import (
    layout1_manifest,
    legacy_payload,
    start_layout1_fixture,
    write_legacy_channel,
    write_legacy_records,
)
from tests.stores.jetstream.test_standby_view import _store

LIMITS = """streaming {
  store_limits {
    channels {
      "capped": { max_msgs: 5 }
      "expired": { max_age: "1s" }
    }
  }
}
"""
BIG = "zz.big"  # converted last (channels go by name)
BIG_COUNT = 60_000


class Layout1(NamedTuple):
    manifest: dict[str, Any]
    cluster_id: str
    url: str
    config: Path  # a node's configuration file (LIMITS)


@pytest.fixture
def layout1(cluster: Cluster, tmp_path: Path) -> Iterator[Layout1]:  # noqa: F811
    """A nats-server on a copy of the cluster written by the stream-per-channel release
    (the ``cluster`` fixture's nodes take its cluster ID), stopped after the test."""
    manifest = layout1_manifest()
    cid = cluster.cluster_id = manifest["cluster_id"]
    config = tmp_path / "node.conf"
    config.write_text(LIMITS)
    server = start_layout1_fixture(tmp_path)
    try:
        yield Layout1(manifest, cid, server[1], config)
    finally:
        stop_nats([server])


def _node_args(url: str, config: Path) -> list[str]:
    return [
        "-sc", str(config), "-ns", url, "-clustered", "-cluster_bootstrap",
        "-cluster_node_id", "b", "-st", "file", "-dir", "store",
    ]  # fmt: skip


async def _stream_names(url: str) -> set[str]:
    nc = await nats.connect(url)
    try:
        return {str(info.config.name) for info in await nc.jetstream().streams_info()}
    finally:
        await nc.close()


async def _records(url: str, cluster_id: str) -> dict[str, bytes]:
    conn = await NatsConnection.connect(url)
    try:
        return await ReplicatedMap(conn, records_bucket(cluster_id)).load()
    finally:
        await conn.close()


async def _subject_sequences(url: str, cluster_id: str, channel: str) -> list[int]:
    """The STAN sequences of the channel's subject of its shared stream, in stream order."""
    index = channel_stream_index(channel, DEFAULT_CHANNEL_STREAMS)
    stream = shared_stream_name(cluster_id, index)
    subject = channel_subject(cluster_id, index, channel)
    conn = await NatsConnection.connect(url)
    try:
        state = await find_stream_state(conn, stream)
        if state is None or not state.msgs:
            return []
        # Other channels may share the stream: the subject's own last message ends it.
        last = await last_of_subject(conn, stream, subject)
        if last is None:
            return []
        found: list[int] = []
        async for _, headers, _ in read_subject(conn, stream, subject, 1, last.stream_seq):
            first, count = message_span(decode_headers(headers)[1])  # a pack: count of them
            found += range(first, first + count)
        return found
    finally:
        await conn.close()


@pytest.mark.slow
async def test_a_cluster_written_by_the_stream_per_channel_release_is_converted(
    cluster: Cluster,  # noqa: F811
    layout1: Layout1,
) -> None:
    manifest, cid, url, config = layout1
    legacy = {legacy_stream_name(cid, name) for name in manifest["channels"]}
    assert legacy <= await _stream_names(url)
    node = cluster.start("b", _node_args(url, config))
    node.wait_for(READY)
    log = node.log()
    converting = f"Converting 4 channel(s) from a stream each to {DEFAULT_CHANNEL_STREAMS} shared"
    assert converting in log
    assert "Converted channel 'orders': 20 message(s) copied" in log
    assert "Converted 4 channel(s) (29 message(s) copied)" in log
    names = await _stream_names(url)
    assert not names & legacy
    assert {shared_stream_name(cid, k) for k in range(DEFAULT_CHANNEL_STREAMS)} <= names
    records = await _records(url, cid)
    assert json.loads(records[LAYOUT_KEY]) == {
        "version": PLAIN_LAYOUT_VERSION,  # no packs written
        "channel_streams": DEFAULT_CHANNEL_STREAMS,
    }

    client = await StanClient.connect(url, cid, "reader")
    for name, want in manifest["channels"].items():
        sub = await client.subscribe(name, start=pb.First)
        got = await sub.collect(len(want["data"])) if want["data"] else []
        await sub.assert_nothing(0.3)
        assert [m.sequence for m in got] == list(range(want["first"], want["last"] + 1))
        assert [m.data.decode() for m in got] == want["data"], name
        status, body = node.http(f"/streaming/channelsz?channel={name}")
        assert status == 200, body
        figures = json.loads(body)
        assert (figures["first_seq"], figures["last_seq"]) == (want["first"], want["last"])
    # The channel whose messages all aged out goes on after its last sequence.
    await client.publish("expired", b"after")
    sub = await client.subscribe("expired", start=pb.First)
    assert [(m.sequence, m.data) for m in await sub.collect(1)] == [(3, b"after")]
    await client.close()

    # The durable resumes with the messages it had not acknowledged, redelivered.
    durable = manifest["durable"]
    owner = await StanClient.connect(url, cid, durable["client"])
    sub = await owner.subscribe(
        durable["channel"], durable=durable["name"], manual_acks=True, max_inflight=100
    )
    redelivered = await sub.collect(len(durable["pending"]))
    assert sorted(m.sequence for m in redelivered) == durable["pending"]
    assert all(m.redelivered for m in redelivered)
    await owner.publish("orders", b"new")
    (fresh,) = await sub.collect(1)
    assert (fresh.sequence, fresh.data, fresh.redelivered) == (21, b"new", False)
    await owner.close()

    # A plain JetStream consumer reads a converted channel from its subject (packs
    # decoded with their protobuf message, spb.MessagePack).
    index = channel_stream_index("orders", DEFAULT_CHANNEL_STREAMS)
    nc = await nats.connect(url)
    try:
        reader = await nc.jetstream().subscribe(
            channel_subject(cid, index, "orders"),
            stream=shared_stream_name(cid, index),
            ordered_consumer=True,
        )
        messages: list[ChannelMessage] = []
        while len(messages) < 21:
            msg = await reader.next_msg(5)
            messages += decode_messages("orders", msg.headers or {}, msg.data)
    finally:
        await nc.close()
    assert [pb.MsgProto.FromString(m.record).data for m in messages[:20]] == [
        d.encode() for d in manifest["channels"]["orders"]["data"]
    ]
    assert [m.sequence for m in messages] == list(range(1, 22))
    assert node.stop() == 0


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_conversion_killed_midway_is_completed_by_the_next_node(
    cluster: Cluster,  # noqa: F811
    layout1: Layout1,
) -> None:
    """kill -9 of the converting node while it copies a large channel: nothing of the
    cluster is lost, and the next node's run completes it, each message once."""
    manifest, cid, url, config = layout1
    conn = await NatsConnection.connect(url)
    try:
        await write_legacy_channel(conn, cid, BIG, BIG_COUNT)
        records = await ReplicatedMap.open(conn, records_bucket(cid), replicas=1)
        records.put(channel_key(BIG), b"")
        await records.flush()
    finally:
        await conn.close()
    node = cluster.start("b", _node_args(url, config))
    deadline = time.monotonic() + 60
    copied: list[int] = []
    while not 0 < len(copied) < BIG_COUNT:
        assert node.proc.poll() is None and time.monotonic() < deadline, node.log()
        copied = await _subject_sequences(url, cid, BIG)
        assert len(copied) < BIG_COUNT, "the copy ended before the node was killed"
    node.proc.kill()  # mid-copy
    node.proc.wait()
    assert copied == list(range(1, len(copied) + 1))
    kept = await _records(url, cid)
    assert kept[channel_key(BIG)] == b""  # still to convert
    assert LAYOUT_KEY not in kept
    assert legacy_stream_name(cid, BIG) in await _stream_names(url)

    again = cluster.start("b", _node_args(url, config), port=node.port)
    again.wait_for(READY)
    assert "Converting 1 channel(s)" in again.log()
    assert await _subject_sequences(url, cid, BIG) == list(range(1, BIG_COUNT + 1))
    assert not {legacy_stream_name(cid, n) for n in [*manifest["channels"], BIG]} & (
        await _stream_names(url)
    )
    client = await StanClient.connect(url, cid, "reader")
    sub = await client.subscribe(BIG, start=pb.SequenceStart, start_sequence=59_990)
    got = await sub.collect(11)
    assert [(m.sequence, m.data) for m in got] == [
        (n, legacy_payload(BIG, n)) for n in range(59_990, BIG_COUNT + 1)
    ]
    orders = await client.subscribe("orders", start=pb.First)
    assert len(await orders.collect(20)) == 20
    await client.close()
    assert again.stop() == 0


# -- a conversion stopped between its steps, in process ------------------------------------


class Stop(Exception):
    """The conversion stopped here, as a crash would stop it (no StoreError: promotion
    would ask again)."""


async def _stop_after_first_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ChannelLog.flush
    calls = [0]

    async def flush(self: ChannelLog, budget: float = 15.0) -> None:
        await real(self, budget)
        calls[0] += 1
        if self.channel == "b.many" and calls[0] >= 2:
            raise Stop("stopped while copying")

    monkeypatch.setattr(ChannelLog, "flush", flush)


async def _stop_before_deleting(monkeypatch: pytest.MonkeyPatch) -> None:
    async def delete(conn: NatsConnection, name: str) -> None:
        raise Stop("stopped before the old stream's deletion")

    monkeypatch.setattr(conversion_module, "delete_stream", delete)


async def _stop_after_deleting(monkeypatch: pytest.MonkeyPatch) -> None:
    real = conversion_module.delete_stream

    async def delete(conn: NatsConnection, name: str) -> None:
        await real(conn, name)
        raise Stop("stopped after the old stream's deletion")

    monkeypatch.setattr(conversion_module, "delete_stream", delete)


STOPS: dict[str, Callable[[pytest.MonkeyPatch], Awaitable[None]]] = {
    "copying": _stop_after_first_batch,
    "before-delete": _stop_before_deleting,
    "after-delete": _stop_after_deleting,
}


@pytest.mark.parametrize("where", sorted(STOPS))
async def test_a_conversion_stopped_between_its_steps_is_completed(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    cid = new_cluster_id()
    conn = await NatsConnection.connect(jetstream_url)
    durable = SubRecord("c1", "in.1", "ack.1", 100, 30, durable_name="d", is_durable=True)
    durable.id, durable.last_sent = 1, 2500
    try:
        await write_legacy_channel(conn, cid, "a.few", 3)
        await write_legacy_channel(conn, cid, "b.many", 2500)
        await write_legacy_channel(conn, cid, "c.moved", 5, first_seq=40)  # a migrated one
        await write_legacy_records(
            conn, cid, ["a.few", "b.many", "c.moved"], {"b.many": [(durable, [2400, 2499])]}
        )
    finally:
        await conn.close()
    await STOPS[where](monkeypatch)
    log = LogCapture()
    node = _store(cid, "a", log)
    await node.connect(NatsEndpoint(jetstream_url))
    try:
        with pytest.raises(Stop):
            await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 60)
    finally:
        node.close()
        await asyncio.sleep(0.3)
    monkeypatch.undo()

    other = _store(cid, "b", LogCapture())
    await other.connect(NatsEndpoint(jetstream_url))
    try:
        assert await asyncio.wait_for(other.acquire_exclusive_lock(lambda _reason: None), 60)
        state = other.recover()
        assert state is not None
        got: dict[str, Any] = {}
        for channel in state.channels:
            msgs = channel.store.msgs
            assert isinstance(msgs, ReplicatedMessages)
            await msgs.load(msgs.first_sequence, msgs.last_sequence)  # read on demand
            records = [
                pb.MsgProto.FromString(msgs.lookup(n) or b"")
                for n in range(msgs.first_sequence, msgs.last_sequence + 1)
            ]
            assert [r.data for r in records] == [
                legacy_payload(channel.store.name, r.sequence) for r in records
            ]
            assert [r.reply for r in records] == [
                f"_INBOX.{r.sequence}" if r.sequence % 3 == 0 else "" for r in records
            ]
            got[channel.store.name] = (msgs.first_sequence, msgs.last_sequence, len(records))
            subs = [(s.record.durable_name, s.pending) for s in channel.subscriptions]
            if channel.store.name == "b.many":
                assert subs == [("d", [2400, 2499])]
        assert got == {"a.few": (1, 3, 3), "b.many": (1, 2500, 2500), "c.moved": (40, 44, 5)}
        for name in got:
            sequences = await _subject_sequences(jetstream_url, cid, name)
            assert sequences == list(range(got[name][0], got[name][1] + 1)), name
        cluster_records = other._records()
        assert cluster_records is not None
        decoded = decode_records(await cluster_records.load())
        assert decoded is not None and decoded.legacy == []
        assert (
            decoded.layout is not None and decoded.layout.channel_streams == DEFAULT_CHANNEL_STREAMS
        )
        conn = await NatsConnection.connect(jetstream_url)
        try:
            for name in got:
                answer = await js_api(conn, f"STREAM.INFO.{legacy_stream_name(cid, name)}", None)
                assert answer["error"]["err_code"] == 10059, name
        finally:
            await conn.close()
    finally:
        other.close()
        await asyncio.sleep(0.2)


async def test_a_layout_one_subject_under_a_shared_streams_is_moved_first(
    jetstream_url: str,
) -> None:
    """Channel ``3.x``'s layout-1 subject ``_STAN.ch.<cluster>.3.x`` falls under shared
    stream 3's subjects, which JetStream would refuse to create beside it."""
    cid = new_cluster_id()
    conn = await NatsConnection.connect(jetstream_url)
    try:
        await write_legacy_channel(conn, cid, "3.x", 4)
        await write_legacy_records(conn, cid, ["3.x"])
    finally:
        await conn.close()
    node = _store(cid, "a", LogCapture())
    await node.connect(NatsEndpoint(jetstream_url))
    try:
        assert await asyncio.wait_for(node.acquire_exclusive_lock(lambda _reason: None), 60)
        state = node.recover()
        assert state is not None
        (channel,) = state.channels
        assert (channel.store.msgs.first_sequence, channel.store.msgs.last_sequence) == (1, 4)
        node.init(ServerInfo.for_cluster(cid, "_STAN.discover"))
    finally:
        node.close()
        await asyncio.sleep(0.2)
