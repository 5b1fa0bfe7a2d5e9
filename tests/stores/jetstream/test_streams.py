"""Shared streams through NatsConnection against real nats-servers with JetStream:
configuration, channels' atomic batches with their STAN sequences and per-channel fences,
batched direct gets of a whole stream or one channel, and what a plain JetStream client
sees of one channel."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream import shared_streams as shared_streams_module
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.layout import channel_subject, shared_stream_name
from stanpkg.stores.jetstream.record_codec import atomic_batch_messages, decode_stream_messages
from stanpkg.stores.jetstream.shared_streams import SharedStreams, UnsupportedServer
from stanpkg.stores.jetstream.stream_management import (
    delete_stream,
    ensure_stream,
    shared_stream_config,
    stream_replicas,
)
from stanpkg.stores.jetstream.stream_reader import (
    StreamState,
    read_range,
    read_subject,
    stream_state,
)
from stanpkg.stores.jetstream.stream_writer import BatchWriter, StreamFenced
from stanpkg.transport.connection import NatsConnection, decode_headers
from tests.stores.jetstream.conftest import (
    NatsProc,
    lead_elsewhere,
    metadata_leader,
    start_jetstream_cluster,
    stop_nats,
)
from tests.transport.conftest import NatsProcess, nats_server, start_nats  # noqa: F401

_clusters = itertools.count(1)


def new_cluster() -> str:
    return f"streams-{next(_clusters)}"


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[NatsConnection]:
    conn = await NatsConnection.connect(url, name="streams-test")
    try:
        yield conn
    finally:
        await conn.close()


async def shared(
    conn: NatsConnection, cluster: str, count: int = 1, replicas: int = 1
) -> SharedStreams:
    streams = SharedStreams(conn, cluster, replicas, count)
    for index in range(count):
        await streams.ensure(index)
    return streams


def channel_log(
    conn: NatsConnection, writer: BatchWriter, cluster: str, channel: str, index: int = 0
) -> ChannelLog:
    # A stream message per STAN message (layout 2's form, still read, and what
    # cluster.pack_bytes 0 writes): these tests count stream sequences. Packs:
    # test_packs.py.
    log = ChannelLog(conn, writer, cluster, channel, index, pack_bytes=0)
    log.writer_id = "w1"
    return log


def write(log: ChannelLog, first: int, count: int, prefix: str = "g") -> None:
    for sequence in range(first, first + count):
        log.append(sequence, "", sequence * 1000, b"m%d" % sequence, f"{prefix}{sequence}")


async def collect(it: AsyncIterator[tuple[int, bytes, bytes]]) -> list[tuple[int, bytes, bytes]]:
    return [item async for item in it]


def stan_sequences(got: list[tuple[int, bytes, bytes]], channel: str) -> list[int]:
    return [m.sequence for _, h, d in got for m in decode_stream_messages(channel, h, d)]


# -- configuration -------------------------------------------------------------------------


def test_config_has_no_stream_wide_limit() -> None:
    config = shared_stream_config("c", 7, replicas=3)
    assert config["name"] == "STAN_c_ch7" and config["subjects"] == ["_STAN.ch.c.7.>"]
    assert config["max_msgs"] == config["max_bytes"] == config["max_msgs_per_subject"] == -1
    assert config["max_age"] == 0 and config["duplicate_window"] == 120 * 10**9
    assert config["num_replicas"] == 3 and config["discard"] == "old"
    assert config["storage"] == "file"
    assert config["allow_direct"] is True and config["allow_atomic"] is True
    assert "first_seq" not in config and "allow_msg_ttl" not in config


async def test_hostile_names_are_accepted_by_jetstream(jetstream_url: str) -> None:
    async with connected(jetstream_url) as conn:
        writer = BatchWriter(conn)
        for cluster, channel in [("a.b c*>", "föö.bar"), ("x" * 300, "y" * 500)]:
            streams = await shared(conn, cluster)
            log = channel_log(conn, writer, cluster, channel)
            write(log, 1, 2)
            await log.flush()
            got = await collect(read_range(conn, streams.name(0), 1, 2))
            assert stan_sequences(got, channel) == [1, 2]
            await delete_stream(conn, streams.name(0))


async def test_a_server_without_atomic_batches_is_refused(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def without_atomic(
        conn: NatsConnection, config: dict[str, Any], *, leader_timeout: float
    ) -> StreamState:
        return StreamState(0, 0, 0, 0, atomic=False)  # as a server before 2.12 answers

    monkeypatch.setattr(shared_streams_module, "ensure_stream", without_atomic)
    async with connected(jetstream_url) as conn:
        with pytest.raises(UnsupportedServer, match=r"needs nats-server 2\.12 or later"):
            await SharedStreams(conn, new_cluster(), 1, 1).ensure(0)


# -- writing and reading -------------------------------------------------------------------


async def test_round_trip_to_msgproto(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        streams = await shared(conn, cluster)
        name = streams.name(0)
        writer = BatchWriter(conn)
        log = channel_log(conn, writer, cluster, "orders.new")
        log.append(1, "_INBOX.reply", 1_700_000_000_123_456_789, b"hello", "guid-1")
        log.append(2, "", 5, b"")
        write(log, 3, 8)
        await log.flush()
        assert (log.last_sequence, log.fence) == (10, 10)
        state = await stream_state(conn, name)
        assert (state.first_seq, state.last_seq, state.msgs, state.atomic) == (1, 10, 10, True)
        got = await collect(read_range(conn, name, 1, 10, batch=3))
        messages = [m for _, h, d in got for m in decode_stream_messages("orders.new", h, d)]
        assert [m.sequence for m in messages] == list(range(1, 11))
        assert (
            messages[0].record
            == pb.MsgProto(
                sequence=1,
                subject="orders.new",
                reply="_INBOX.reply",
                data=b"hello",
                timestamp=1_700_000_000_123_456_789,
            ).SerializeToString()
        )
        assert messages[0].guid == "guid-1"
        # An empty publish ID becomes the writer's own, naming the channel.
        assert messages[1].guid == "w1:orders.new:2"
        assert (
            messages[1].record
            == pb.MsgProto(sequence=2, subject="orders.new", timestamp=5).SerializeToString()
        )
        # a sub-range, and ranges past the end
        assert [s for s, _, _ in await collect(read_range(conn, name, 4, 6))] == [4, 5, 6]
        assert [s for s, _, _ in await collect(read_range(conn, name, 9, 50))] == [9, 10]
        assert await collect(read_range(conn, name, 11, 20)) == []
        await delete_stream(conn, name)
        await delete_stream(conn, name)  # already gone: no error


async def test_channels_of_one_stream_are_read_apart(jetstream_url: str) -> None:
    """Two channels interleaved in one stream: each keeps its own STAN sequences and its
    own fence; one channel is read by its subject alone, from any stream sequence."""
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        streams = await shared(conn, cluster)
        writer = BatchWriter(conn)
        a = channel_log(conn, writer, cluster, "a")
        b = channel_log(conn, writer, cluster, "b")
        for first in (1, 4, 7):
            write(a, first, 3, "a")
            write(b, first, 3, "b")
            await asyncio.gather(a.flush(), b.flush())  # both in flight at once
        assert (a.last_sequence, b.last_sequence) == (9, 9)
        assert a.fence != b.fence and max(a.fence, b.fence) == 18
        subject = a.subject
        got = await collect(read_subject(conn, streams.name(0), subject, 1, a.fence, batch=2))
        assert stan_sequences(got, "a") == list(range(1, 10))
        assert all(decode_headers(h)[1]["Nats-Subject"] == subject for _, h, _ in got)
        middle = got[4][0]
        later = await collect(read_subject(conn, streams.name(0), subject, middle + 1, a.fence))
        assert stan_sequences(later, "a") == list(range(6, 10))
        # The positions of each channel's runs in the stream.
        assert a.positions.stream_seq(5) == got[4][0]
        last = await b.last_message()
        assert last is not None and (last.sequence, last.stream_seq) == (9, b.fence)


async def test_a_direct_get_nobody_answers_is_sent_again(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct get that reached a replica's server as it died is never answered: the read
    asks again after DIRECT_GET_ASK_AGAIN instead of waiting out its whole timeout, and an
    answer to a request it gave up on, arriving later, is not mixed into the next batch."""
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        streams = await shared(conn, cluster)
        log = channel_log(conn, BatchWriter(conn), cluster, "lost")
        write(log, 1, 10)
        await log.flush()
        name = streams.name(0)
        sent = conn.publish
        requests: list[tuple[str, bytes]] = []

        def losing_the_first(subject: str, payload: bytes, reply: str = "") -> None:
            if subject.startswith("$JS.API.DIRECT.GET."):
                requests.append((reply, payload))
                if len(requests) == 1:
                    return  # lost on the way
                if len(requests) == 3:  # a late second answer to the first batch comes first
                    sent(subject, requests[1][1], requests[1][0])
            sent(subject, payload, reply)

        monkeypatch.setattr(conn, "publish", losing_the_first)
        started = time.monotonic()
        got = await collect(read_range(conn, name, 1, 10, batch=4))
        assert time.monotonic() - started < 2  # not the 5 s of one request's timeout
        assert [sequence for sequence, _, _ in got] == list(range(1, 11))
        assert len({reply for reply, _ in requests}) == len(requests) == 4  # 1 lost, 3 batches
        monkeypatch.undo()
        # a stream nobody answers for still fails at the read's timeout
        monkeypatch.setattr(conn, "publish", lambda subject, payload, reply="": None)
        with pytest.raises(StoreError, match=r"no answer .* within 1 s"):
            await collect(read_range(conn, name, 1, 10, timeout=1))


async def test_a_publish_id_another_channel_has_is_stored(jetstream_url: str) -> None:
    """Publish IDs are a plain header: JetStream's duplicate window would cover every
    channel of the stream and refuse a batch holding another channel's ID. The Go server
    stores such a message, and so does the store."""
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        await shared(conn, cluster)
        writer = BatchWriter(conn)
        first = channel_log(conn, writer, cluster, "first")
        write(first, 1, 3)
        await first.flush()
        other = channel_log(conn, writer, cluster, "other")
        other.append(1, "", 1, b"new", "fresh")
        other.append(2, "", 1, b"again", "g2")  # first's message 2's ID
        await other.flush(budget=0)
        last = await other.last_message()
        assert last is not None and (last.sequence, last.guid) == (2, "g2")


async def test_a_batch_sent_again_after_a_lost_answer_is_stored_once(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        streams = await shared(conn, cluster)
        log = channel_log(conn, BatchWriter(conn), cluster, "orders")
        write(log, 1, 10)
        writes = log.take()
        log.abandon(log.send(writes))  # stored, but its answer never read
        for _ in range(50):
            if (await stream_state(conn, streams.name(0))).last_seq == 10:
                break
            await asyncio.sleep(0.02)
        await log.write(writes)  # refused for its expectation: the stream holds it already
        assert (log.last_sequence, log.fence) == (10, 10)
        assert (await stream_state(conn, streams.name(0))).msgs == 10


async def test_another_writer_fences_this_one(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        await shared(conn, cluster)
        writer = BatchWriter(conn)
        mine = channel_log(conn, writer, cluster, "fence")
        write(mine, 1, 2)
        await mine.flush()
        theirs = channel_log(conn, writer, cluster, "fence")  # a new leader
        theirs.start_at(await theirs.last_message())
        theirs.append(3, "", 1, b"theirs", "t3")
        await theirs.flush()
        mine.append(3, "", 1, b"mine", "g3")
        with pytest.raises(StreamFenced, match="another node"):
            await mine.flush()  # its sequence 3 is there, not its own
        stale = channel_log(conn, writer, cluster, "fence")  # knows nothing: expects none
        stale.append(1, "", 1, b"stale", "s1")
        with pytest.raises(StreamFenced, match=r"is at 3 in stream \S+, this node expected 0"):
            await stale.flush()
        got = await collect(read_subject(conn, theirs.stream, theirs.subject, 1, theirs.fence))
        assert [d for _, _, d in got] == [b"m1", b"m2", b"theirs"]


async def test_a_purged_channel_expects_nothing(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        await shared(conn, cluster)
        writer = BatchWriter(conn)
        log = channel_log(conn, writer, cluster, "purged")
        neighbour = channel_log(conn, writer, cluster, "neighbour")
        write(log, 1, 5)
        await log.flush()
        write(neighbour, 1, 1, "n")
        await neighbour.flush()
        await log.purge_below(log.positions.stream_seq(4))  # 1..3 go
        got = await collect(read_subject(conn, log.stream, log.subject, 1, log.fence))
        assert stan_sequences(got, "purged") == [4, 5]
        await log.purge_below(log.fence + 1)  # everything
        assert log.fence == 0 and await log.last_message() is None
        write(log, 6, 1)  # the channel goes on, its subject empty
        await log.flush()
        last = await log.last_message()
        assert last is not None and last.sequence == 6
        assert await neighbour.last_message() is not None


async def test_a_channel_may_start_at_any_sequence(jetstream_url: str) -> None:
    """A migrated channel keeps its sequences: they are the messages', not the stream's."""
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        await shared(conn, cluster)
        log = channel_log(conn, BatchWriter(conn), cluster, "imported")
        write(log, 100, 2)
        await log.flush()
        got = await collect(read_subject(conn, log.stream, log.subject, 1, log.fence))
        assert stan_sequences(got, "imported") == [100, 101]
        assert [s for s, _, _ in got] == [1, 2]


async def test_write_without_stream_fails(jetstream_url: str) -> None:
    async with connected(jetstream_url) as conn:
        log = channel_log(conn, BatchWriter(conn), "nobody", "here")
        write(log, 1, 2)
        with pytest.raises(StoreError, match="no stream"):
            await log.flush(budget=0)
        assert log.fence == 0
        with pytest.raises(StoreError, match="no stream"):
            await collect(read_range(conn, "STAN_missing_ch0", 1, 5))
        with pytest.raises(StoreError, match="stream not found"):
            await stream_state(conn, "STAN_missing_ch0")


async def test_refused_configuration_is_a_store_error(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        await shared(conn, cluster)
        thief = shared_stream_config(cluster, 1, replicas=1)
        thief["subjects"] = [channel_subject(cluster, 0, "taken")]  # the first stream's
        with pytest.raises(StoreError, match="unable to create stream"):
            await ensure_stream(conn, thief)
        with pytest.raises(StoreError, match="unable to create stream"):  # one server only
            await SharedStreams(conn, new_cluster(), 5, 1).ensure(0)


async def test_a_plain_jetstream_consumer_reads_one_channel(jetstream_url: str) -> None:
    """Any JetStream client reads a channel with a subject filter on its shared stream:
    the payloads as published, STAN's fields in headers, no other channel's messages."""
    cluster = new_cluster()
    nc = await nats.connect(jetstream_url)
    try:
        async with connected(jetstream_url) as conn:
            streams = await shared(conn, cluster)
            writer = BatchWriter(conn)
            news = channel_log(conn, writer, cluster, "public.news")
            noise = channel_log(conn, writer, cluster, "public.noise")
            for first in (1, 3):
                write(news, first, 2)
                write(noise, first, 2, "n")
                await asyncio.gather(news.flush(), noise.flush())
            news.append(5, "_INBOX.r", 42, b"last", "g5")
            await news.flush()
        js = nc.jetstream()
        subject = channel_subject(cluster, 0, "public.news")
        ordered = await js.subscribe(subject, stream=streams.name(0), ordered_consumer=True)
        messages = [await ordered.next_msg(timeout=5) for _ in range(5)]
        assert [m.data for m in messages] == [b"m1", b"m2", b"m3", b"m4", b"last"]
        assert {m.subject for m in messages} == {subject}
        headers = messages[4].headers
        assert headers is not None
        assert headers["Stan-Sequence"] == "5" and headers["Stan-Reply"] == "_INBOX.r"
        assert headers["Stan-Timestamp"] == "42" and headers["Stan-Guid"] == "g5"
        with pytest.raises(nats.errors.TimeoutError):
            await ordered.next_msg(timeout=0.3)
        # A pull consumer with a filter that does not name the stream index reads it too.
        wildcard = f"_STAN.ch.{cluster}.*.public.news"
        pull = await js.pull_subscribe(wildcard, stream=streams.name(0))
        fetched = await pull.fetch(5, timeout=5)
        assert [m.data for m in fetched] == [b"m1", b"m2", b"m3", b"m4", b"last"]
        assert [int((m.headers or {})["Stan-Sequence"]) for m in fetched] == [1, 2, 3, 4, 5]
    finally:
        await nc.close()


async def test_unanswered_writes_are_a_store_error(jetstream_url: str) -> None:
    async with connected(jetstream_url) as conn:
        conn.subscribe("quiet.listener", lambda subject, reply, payload: None)  # never answers
        await conn.flush()
        writer = BatchWriter(conn)
        messages = atomic_batch_messages([(1, "g1", "", 1, b"x")], "b1", 0)
        sent = writer.send("quiet.listener", messages)
        with pytest.raises(StoreError, match=r"did not answer a write to quiet\.listener"):
            await writer.answer(sent, 0.3)


async def until_answered_through(conn: NatsConnection, log: ChannelLog) -> None:
    """Until the stream answers writes sent through ``conn``'s server. The create's answer
    comes from the new stream leader; its interest in the subjects reaches the other
    servers over the routes a moment later, and a write sent meanwhile gets a 503 (which
    ChannelLog.write sends again for its budget)."""
    for _ in range(100):
        with contextlib.suppress(StoreError):
            await log.last_message()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{log.stream}: no answer through this server")


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_replicated_stream_round_trip(tmp_path: Path) -> None:
    servers = start_jetstream_cluster(tmp_path, 3)
    try:
        async with connected(servers[1][1]) as conn:
            streams = await shared(conn, "r3", replicas=3)
            log = channel_log(conn, BatchWriter(conn), "r3", "replicated")
            await until_answered_through(conn, log)
            for first in range(1, 1000, 100):  # each read right after the acks: any replica
                write(log, first, 100)
                await log.write(log.take(), budget=20)
                got = await collect(read_subject(conn, log.stream, log.subject, 1, log.fence))
                assert stan_sequences(got, "replicated") == list(range(1, first + 100))
                assert got[-1][2] == b"m%d" % (first + 99)
            assert (await stream_state(conn, streams.name(0))).msgs == 1000
    finally:
        stop_nats(servers)


# What a publish ID or reply can be: decoded protobuf strings (never a lone surrogate),
# without the line breaks atomic_batch_messages refuses.
HEADER_TEXT = st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))


def _as_header_reads(text: str) -> str:
    """A header value as a header block gives it back: without the ASCII blanks around
    it."""
    return text.strip(" \t\x0b\x0c")


def writes_of(max_payload: int, max_count: int) -> st.SearchStrategy[list[Any]]:
    """Lists of a write's (publish ID, reply, timestamp, payload), without its sequence."""
    return st.lists(
        st.tuples(
            st.text(alphabet=HEADER_TEXT, max_size=30).map(_as_header_reads),
            st.text(alphabet=HEADER_TEXT, max_size=30).map(_as_header_reads),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.binary(max_size=max_payload),
        ),
        min_size=1,
        max_size=max_count,
    )


@given(
    writes_of(20, 12),
    st.integers(min_value=1, max_value=2**40),
    st.integers(min_value=0, max_value=2**40),
)
def test_atomic_batch_messages_carry_each_field(
    writes: list[tuple[str, str, int, bytes]], first: int, expected: int
) -> None:
    batch = [(first + i, *write) for i, write in enumerate(writes)]
    out = atomic_batch_messages(batch, "b-1", expected)
    assert len(out) == len(batch)
    for index, ((headers, data), (sequence, guid, reply, timestamp, payload)) in enumerate(
        zip(out, batch, strict=True)
    ):
        status, fields = decode_headers(headers)
        assert status == 0 and data == payload
        wanted = {"Stan-Sequence": str(sequence), "Stan-Timestamp": str(timestamp)}
        if guid:
            wanted["Stan-Guid"] = guid
        if reply:
            wanted["Stan-Reply"] = reply
        if index == 0:
            wanted["Nats-Expected-Last-Subject-Sequence"] = str(expected)
        wanted |= {"Nats-Batch-Id": "b-1", "Nats-Batch-Sequence": str(index + 1)}
        if index == len(batch) - 1:
            wanted["Nats-Batch-Commit"] = "1"
        assert fields == wanted


def test_an_empty_atomic_batch_is_no_message() -> None:
    assert atomic_batch_messages([], "b-1", 0) == []


def test_a_line_break_in_an_atomic_batch_is_refused() -> None:
    good = (1, "g1", "", 1, b"")
    for bad in ((2, "g\r\nX: y", "", 1, b""), (2, "g2", "r\n", 1, b"")):
        with pytest.raises(ValueError, match="a line break"):
            atomic_batch_messages([good, bad], "b", 0)


@pytest.mark.slow
async def test_an_existing_stream_is_ensured_without_a_metadata_leader(
    monitored_cluster: tuple[list[NatsProc], list[int]],
) -> None:
    """Promotion ensures every shared stream while JetStream elects a new metadata leader
    (4-9 s after the old one died with the serving node): a stream that exists is read
    from its own leader; only creating or updating one needs the metadata leader."""
    servers, http_ports = monitored_cluster
    names = [f"js{index + 1}" for index in range(3)]
    meta = metadata_leader(http_ports[0])
    survivor = servers[(names.index(meta) + 1) % 3][1]
    config = shared_stream_config(new_cluster(), 0, replicas=3)
    async with connected(survivor) as conn:
        created = await ensure_stream(conn, config)
        await lead_elsewhere(survivor, config["name"], avoid=meta)
        servers[names.index(meta)][0].kill()
        started = time.monotonic()
        state = await asyncio.wait_for(ensure_stream(conn, config, leader_timeout=2), 3.5)
        assert time.monotonic() - started < 3.5  # JetStream's election takes 4 s at least
        assert state == created


# What JetStream's API answered in each case (nats-server 2.15, three servers): a create of
# a stream that exists with the same configuration comes back without "did_create", with the
# state of whichever replica answered; only a create that made the stream says
# "did_create"; the info comes from the stream's leader only (none while it elects).
_EXISTING_ANSWERED_BY_A_REPLICA = {"config": {}, "state": {"first_seq": 0, "last_seq": 0}}
_LEADERS_INFO = {"config": {}, "state": {"first_seq": 1, "last_seq": 10}}
_MADE = {"config": {}, "state": {"first_seq": 0, "last_seq": 0}, "did_create": True}
_NOT_FOUND = {"error": {"code": 404, "err_code": 10059, "description": "stream not found"}}


async def _answering(
    url: str, name: str, create: dict[str, Any], info: dict[str, Any] | None, delay: float
) -> StreamState:
    """ensure_stream against a stand-in for JetStream's API on a plain nats-server (the
    race of a failover cannot be had on demand): ``create`` answered at once, ``info``
    after ``delay`` seconds (never if None)."""
    async with connected(url) as api, connected(url) as conn:

        def answer(body: dict[str, Any], wait: float) -> Callable[[str, str, bytes], None]:
            def on_request(_subject: str, reply: str, _data: bytes) -> None:
                async def later() -> None:
                    await asyncio.sleep(wait)
                    api.publish(reply, json.dumps(body).encode())

                tasks.add(asyncio.get_running_loop().create_task(later()))

            return on_request

        tasks: set[asyncio.Task[None]] = set()
        api.subscribe(f"$JS.API.STREAM.CREATE.{name}", answer(create, 0))
        if info is not None:
            api.subscribe(f"$JS.API.STREAM.INFO.{name}", answer(info, delay))
        await api.flush()
        try:
            return await ensure_stream(conn, {"name": name}, leader_timeout=3)
        finally:
            for task in tasks:
                task.cancel()


async def test_an_existing_stream_is_taken_from_its_leaders_info(
    nats_server: NatsProcess,  # noqa: F811
) -> None:
    """Seen in a three-node failover (tests/cluster): the promoted node's create was
    answered at once by a replica that had not applied the dead leader's last committed
    writes, an empty stream that held 10 messages. The create of an existing stream does
    not settle it: the leader's info, once elected, does."""
    url = nats_server.url
    state = await _answering(url, "S1", _EXISTING_ANSWERED_BY_A_REPLICA, _LEADERS_INFO, 0.3)
    assert (state.first_seq, state.last_seq) == (1, 10)
    # A create that made the stream settles at once (a new stream has no leader to ask
    # yet); so does one from a server that does not say did_create, when the info finds no
    # stream.
    assert (await _answering(url, "S2", _MADE, None, 0)).last_seq == 0
    assert (await _answering(url, "S3", _EXISTING_ANSWERED_BY_A_REPLICA, _NOT_FOUND, 0)) == (
        StreamState(0, 0, 0, 0, False)
    )
    with pytest.raises(StoreError, match="did not settle"):  # no leader ever: no guess
        await _answering(url, "S4", _EXISTING_ANSWERED_BY_A_REPLICA, None, 0)


@pytest.mark.slow
async def test_an_existing_stream_is_read_from_its_leader_not_a_lagging_replica(
    monitored_cluster: tuple[list[NatsProc], list[int]],
) -> None:
    """Seen in a three-node failover (tests/cluster): the serving node led the stream and
    died right after its last writes were committed. JetStream's metadata leader answered
    the promoted node's create at once from its own replica, which had not applied those
    writes: an empty stream. Only the stream leader's state counts: ensure waits for the
    new leader, which has every committed write."""
    servers, http_ports = monitored_cluster
    names = [f"js{index + 1}" for index in range(3)]
    meta = names.index(metadata_leader(http_ports[0]))
    cluster = new_cluster()
    config = shared_stream_config(cluster, 0, replicas=3)
    first = servers[(meta + 1) % 3][1]
    async with connected(first) as conn:
        await ensure_stream(conn, config)
        await lead_elsewhere(first, config["name"], avoid=names[meta])
        leader = names.index((await stream_replicas(conn, config["name"]))[0])
    survivor = next(i for i in range(3) if i not in (meta, leader))
    async with connected(servers[survivor][1]) as conn:
        log = channel_log(conn, BatchWriter(conn), cluster, "orders")
        await until_answered_through(conn, log)
        servers[meta][0].send_signal(signal.SIGSTOP)  # its replica misses the writes
        try:
            write(log, 1, 10)
            await log.flush()  # the leader and the survivor
            servers[leader][0].kill()
        finally:
            servers[meta][0].send_signal(signal.SIGCONT)
        state = await ensure_stream(conn, config, leader_timeout=30)
        assert (state.first_seq, state.last_seq) == (1, 10)
        assert shared_stream_name(cluster, 0) == config["name"]
