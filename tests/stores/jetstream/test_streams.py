"""Channel streams through NatsConnection against real nats-servers with JetStream: names,
configuration, pipelined writes with message IDs and expected sequences, batched direct
gets, and what a plain JetStream client sees."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stanpkg.plan.limits import Limits
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.layout import stream_name, stream_subject
from stanpkg.stores.jetstream.records import (
    atomic_batch_messages,
    batch_headers,
    from_stream_message,
    to_stream_message,
)
from stanpkg.stores.jetstream.stream_management import (
    delete_stream,
    ensure_stream,
    stream_config,
    stream_replicas,
)
from stanpkg.stores.jetstream.stream_reader import StreamState, read_range, stream_state
from stanpkg.stores.jetstream.stream_writer import StreamFenced, StreamWriter
from stanpkg.transport.connection import NatsConnection, decode_headers
from tests.stores.jetstream.conftest import (
    NatsProc,
    lead_elsewhere,
    metadata_leader,
    start_jetstream_cluster,
    stop_nats,
)
from tests.transport.conftest import NatsProcess, nats_server, start_nats  # noqa: F401

UNLIMITED = Limits(max_subs=0, max_msgs=0, max_bytes=0, max_age=0, max_inactivity=0)
_clusters = itertools.count(1)
_VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")


def new_cluster() -> str:
    return f"streams-{next(_clusters)}"


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[NatsConnection]:
    conn = await NatsConnection.connect(url, name="streams-test")
    try:
        yield conn
    finally:
        await conn.close()


async def create(
    conn: NatsConnection,
    cluster: str,
    channel: str,
    limits: Limits = UNLIMITED,
    replicas: int = 1,
    first_seq: int = 1,
) -> StreamWriter:
    config = stream_config(cluster, channel, limits, replicas=replicas, first_seq=first_seq)
    state = await ensure_stream(conn, config)
    return StreamWriter(conn, subject=config["subjects"][0], last_sequence=state.last_seq)


def write(writer: StreamWriter, first: int, count: int, prefix: str = "g") -> None:
    for sequence in range(first, first + count):
        writer.append(sequence, f"{prefix}{sequence}", "", sequence * 1000, b"m%d" % sequence)


async def collect(it: AsyncIterator[tuple[int, bytes, bytes]]) -> list[tuple[int, bytes, bytes]]:
    return [item async for item in it]


# -- names and configuration ---------------------------------------------------------------


def test_hostile_names_are_valid_and_distinct() -> None:
    clusters = ["c", "a.b", "a_b", "a b", "a*b", "a>b", "a/b\\c", "ü", "", "x" * 300, "=x"]
    channels = ["foo", "foo.bar", "foo_bar", "föö", "f" * 500, "a.b.c", "_STAN.pub.x"]
    names = {stream_name(c, ch) for c in clusters for ch in channels}
    subjects = {stream_subject(c, ch) for c in clusters for ch in channels}
    assert len(names) == len(subjects) == len(clusters) * len(channels)
    assert all(_VALID_NAME.fullmatch(name) for name in names)
    for subject in subjects:
        tokens = subject.split(".")
        assert tokens[:2] == ["_STAN", "ch"] and all(tokens)
        assert not any(ch in subject for ch in " \t*>")
    assert stream_name("c", "foo.bar").startswith("STAN_c_foo_bar_")
    assert stream_subject("c", "foo.bar") == "_STAN.ch.c.foo.bar"


def test_line_breaks_cannot_forge_headers() -> None:
    for guid, reply in [("g\r\nNats-Expected-Last-Sequence: 9", ""), ("g", "r\nX: y")]:
        with pytest.raises(ValueError):
            to_stream_message(guid, reply, 0, b"")
    headers, data = to_stream_message("g", "", 7, b"d", expected_last=3)
    assert data == b"d"
    assert decode_headers(headers) == (
        0,
        {"Nats-Msg-Id": "g", "Stan-Timestamp": "7", "Nats-Expected-Last-Sequence": "3"},
    )


def test_config_limits() -> None:
    limits = Limits(max_subs=1, max_msgs=10, max_bytes=2048, max_age=30 * 10**9, max_inactivity=0)
    config = stream_config("c", "foo", limits, replicas=3, first_seq=7)
    assert config["max_msgs"] == 10 and config["max_bytes"] == 2048
    assert config["max_age"] == 30 * 10**9 == config["duplicate_window"]  # window <= age
    assert config["num_replicas"] == 3 and config["first_seq"] == 7
    assert config["discard"] == "old" and config["storage"] == "file"
    assert config["allow_direct"] is True
    open_ended = stream_config("c", "foo", UNLIMITED, replicas=1)
    assert open_ended["max_msgs"] == open_ended["max_bytes"] == -1
    assert open_ended["max_age"] == 0 and open_ended["duplicate_window"] == 120 * 10**9


async def test_hostile_names_are_accepted_by_jetstream(jetstream_url: str) -> None:
    async with connected(jetstream_url) as conn:
        for cluster, channel in [("a.b c*>", "föö.bar"), ("x" * 300, "y" * 500)]:
            config = stream_config(cluster, channel, UNLIMITED, replicas=1)
            await ensure_stream(conn, config)
            await delete_stream(conn, config["name"])


# -- writing and reading -------------------------------------------------------------------


async def test_round_trip_to_msgproto(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        writer = await create(conn, cluster, "orders.new")
        writer.append(1, "guid-1", "_INBOX.reply", 1_700_000_000_123_456_789, b"hello")
        writer.append(2, "guid-2", "", 5, b"")
        write(writer, 3, 8)
        results = await writer.flush()
        assert [(r.sequence, r.stored, r.duplicate, r.ok) for r in results] == [
            (n, n, False, True) for n in range(1, 11)
        ]
        assert writer.last_sequence == 10
        name = stream_name(cluster, "orders.new")
        state = await stream_state(conn, name)
        assert (state.first_seq, state.last_seq, state.msgs) == (1, 10, 10)
        assert state.atomic  # nats-server 2.12 and later take atomic batches
        got = await collect(read_range(conn, name, 1, 10, batch=3))
        assert [sequence for sequence, _, _ in got] == list(range(1, 11))
        records = [from_stream_message(s, h, d, channel="orders.new") for s, h, d in got]
        assert (
            records[0]
            == pb.MsgProto(
                sequence=1,
                subject="orders.new",
                reply="_INBOX.reply",
                data=b"hello",
                timestamp=1_700_000_000_123_456_789,
            ).SerializeToString()
        )
        assert (
            records[1]
            == pb.MsgProto(sequence=2, subject="orders.new", timestamp=5).SerializeToString()
        )
        assert pb.MsgProto.FromString(records[9]).data == b"m10"
        # a sub-range, and ranges past the end
        assert [s for s, _, _ in await collect(read_range(conn, name, 4, 6))] == [4, 5, 6]
        assert [s for s, _, _ in await collect(read_range(conn, name, 9, 50))] == [9, 10]
        assert await collect(read_range(conn, name, 11, 20)) == []
        await delete_stream(conn, name)
        await delete_stream(conn, name)  # already gone: no error


async def test_a_direct_get_nobody_answers_is_sent_again(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct get that reached a replica's server as it died is never answered: the read
    asks again after DIRECT_GET_ASK_AGAIN instead of waiting out its whole timeout, and an
    answer to a request it gave up on, arriving later, is not mixed into the next batch."""
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        writer = await create(conn, cluster, "lost")
        write(writer, 1, 10)
        await writer.flush()
        name = stream_name(cluster, "lost")
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


async def test_resend_of_a_guid_is_a_duplicate(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        writer = await create(conn, cluster, "dup")
        write(writer, 1, 3)
        await writer.flush()
        writer.append(4, "g2", "", 0, b"resent")  # a client resending after a failover
        [result] = await writer.flush()
        assert result.ok and result.duplicate and result.stored == 2
        assert writer.last_sequence == 3
        state = await stream_state(conn, stream_name(cluster, "dup"))
        assert (state.last_seq, state.msgs) == (3, 3)
        # In a batch, a resend takes no sequence: the writes after it are renumbered.
        writer.append(4, "g5", "", 0, b"new4")
        writer.append(5, "g1", "", 0, b"resent")
        writer.append(6, "g6", "", 0, b"new5")
        writer.append(7, "g7", "", 0, b"new6")
        results = await writer.flush()
        assert [(r.sequence, r.stored, r.duplicate) for r in results] == [
            (4, 4, False),
            (5, 1, True),
            (6, 5, False),
            (7, 6, False),
        ]
        assert writer.last_sequence == 6
        got = await collect(read_range(conn, stream_name(cluster, "dup"), 4, 6))
        assert [(s, d) for s, _, d in got] == [(4, b"new4"), (5, b"new5"), (6, b"new6")]


async def test_wrong_expected_sequence_is_fenced(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        active = await create(conn, cluster, "fence")
        stale = StreamWriter(conn, subject=active.subject, last_sequence=0)
        write(active, 1, 3)
        await active.flush()
        write(stale, 1, 2, prefix="stale")  # a node that lost the lease without knowing
        with pytest.raises(StreamFenced):
            await stale.flush()
        write(active, 3, 1, prefix="other")  # a reorder: the stream is at 3, not 2
        with pytest.raises(StreamFenced):
            await active.flush()
        name = stream_name(cluster, "fence")
        state = await stream_state(conn, name)
        assert (state.last_seq, state.msgs) == (3, 3)
        got = await collect(read_range(conn, name, 1, 3))
        assert [d for _, _, d in got] == [b"m1", b"m2", b"m3"]


async def test_write_without_stream_fails_per_write(jetstream_url: str) -> None:
    async with connected(jetstream_url) as conn:
        writer = StreamWriter(conn, subject="_STAN.ch.nobody.here", last_sequence=0)
        write(writer, 1, 2)
        results = await writer.flush()
        assert [r.ok for r in results] == [False, False]
        assert "503" in results[0].error and writer.last_sequence == 0
        assert await writer.flush() == []
        with pytest.raises(StoreError, match="no stream"):
            await collect(read_range(conn, "STAN_missing_0", 1, 5))
        with pytest.raises(StoreError, match="stream not found"):
            await stream_state(conn, "STAN_missing_0")


async def test_limits_discard_old_and_update(jetstream_url: str) -> None:
    cluster = new_cluster()
    limits = Limits(max_subs=0, max_msgs=3, max_bytes=0, max_age=0, max_inactivity=0)
    async with connected(jetstream_url) as conn:
        writer = await create(conn, cluster, "small", limits)
        write(writer, 1, 5)
        await writer.flush()
        name = stream_name(cluster, "small")
        state = await stream_state(conn, name)
        assert (state.first_seq, state.last_seq, state.msgs) == (3, 5, 3)
        assert [s for s, _, _ in await collect(read_range(conn, name, 1, 5))] == [3, 4, 5]
        bigger = Limits(max_subs=0, max_msgs=10, max_bytes=0, max_age=60 * 10**9, max_inactivity=0)
        state = await ensure_stream(conn, stream_config(cluster, "small", bigger, replicas=1))
        assert (state.first_seq, state.last_seq) == (3, 5)  # updated, not recreated
        write(writer, 6, 5)
        await writer.flush()
        assert (await stream_state(conn, name)).msgs == 8


async def test_refused_configuration_is_a_store_error(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        await create(conn, cluster, "taken")
        thief = stream_config(cluster, "other", UNLIMITED, replicas=1)
        thief["subjects"] = [stream_subject(cluster, "taken")]  # overlaps the first stream
        with pytest.raises(StoreError, match="unable to create stream"):
            await ensure_stream(conn, thief)
        too_many = stream_config(cluster, "r5", UNLIMITED, replicas=5)  # one server only
        with pytest.raises(StoreError, match="unable to create stream"):
            await ensure_stream(conn, too_many)


async def test_stream_can_start_at_any_sequence(jetstream_url: str) -> None:
    cluster = new_cluster()
    async with connected(jetstream_url) as conn:
        writer = await create(conn, cluster, "imported", first_seq=100)
        assert writer.last_sequence == 99
        write(writer, 100, 2)
        assert [r.stored for r in await writer.flush()] == [100, 101]
        name = stream_name(cluster, "imported")
        assert [s for s, _, _ in await collect(read_range(conn, name, 1, 200))] == [100, 101]


async def test_plain_jetstream_consumer_reads_the_payloads(jetstream_url: str) -> None:
    cluster = new_cluster()
    nc = await nats.connect(jetstream_url)
    try:
        async with connected(jetstream_url) as conn:
            writer = await create(conn, cluster, "public.news")
            write(writer, 1, 3)
            writer.append(4, "g4", "_INBOX.r", 42, b"last")
            await writer.flush()
            sub = await nc.jetstream().subscribe("_STAN.ch.*.public.news", ordered_consumer=True)
            messages = [await sub.next_msg(timeout=5) for _ in range(4)]
            assert [m.data for m in messages] == [b"m1", b"m2", b"m3", b"last"]
            assert messages[3].headers is not None
            assert messages[3].headers["Stan-Reply"] == "_INBOX.r"
            assert messages[3].headers["Stan-Timestamp"] == "42"
            assert messages[3].headers["Nats-Msg-Id"] == "g4"
            assert messages[3].subject == f"_STAN.ch.{cluster}.public.news"
    finally:
        await nc.close()


async def test_unanswered_writes_are_a_store_error(jetstream_url: str) -> None:
    async with connected(jetstream_url) as conn:
        conn.subscribe("quiet.listener", lambda subject, reply, payload: None)  # never answers
        await conn.flush()
        writer = StreamWriter(conn, subject="quiet.listener", last_sequence=0)
        write(writer, 1, 3)
        with pytest.raises(StoreError, match="did not answer 3 of 3 writes"):
            await writer.flush(timeout=0.3)
        assert writer.last_sequence == 0


async def until_answered_through(conn: NatsConnection, subject: str) -> None:
    """Until the stream answers writes sent through ``conn``'s server. The create's answer
    comes from the new stream leader; its interest in the subject reaches the other
    servers over the routes a moment later, and a write sent meanwhile gets a 503 (which
    the clustered store sends again, see ChannelStream.write; this low-level writer does
    not). The probe expects a last sequence the stream never has: refused, not stored."""
    probe = StreamWriter(conn, subject=subject, last_sequence=10**9)
    for _ in range(100):
        write(probe, 10**9 + 1, 1, prefix="probe")
        try:
            (answer,) = await probe.flush(timeout=2)
        except StreamFenced:
            return  # refused for its expected last sequence: the stream answered
        await asyncio.sleep(0.05)
    raise AssertionError(f"{subject}: no answer through this server: {answer.error}")


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_replicated_stream_round_trip(tmp_path: Path) -> None:
    servers = start_jetstream_cluster(tmp_path, 3)
    try:
        async with connected(servers[1][1]) as conn:
            writer = await create(conn, "r3", "replicated", replicas=3)
            name = stream_name("r3", "replicated")
            await until_answered_through(conn, writer.subject)
            for first in range(1, 1000, 100):  # each read right after the acks: any replica
                write(writer, first, 100)
                results = await writer.flush(timeout=20)
                assert [r.stored for r in results] == list(range(first, first + 100))
                got = await collect(read_range(conn, name, first, first + 99))
                assert [s for s, _, _ in got] == list(range(first, first + 100))
                assert got[99][2] == b"m%d" % (first + 99)
            assert (await stream_state(conn, name)).msgs == 1000
    finally:
        stop_nats(servers)


# What a publish ID or reply can be: decoded protobuf strings (never a lone surrogate),
# without the line breaks to_stream_message refuses.
HEADER_TEXT = st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))


@given(
    st.lists(
        st.tuples(
            st.text(alphabet=HEADER_TEXT, max_size=30),
            st.text(alphabet=HEADER_TEXT, max_size=30),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.binary(max_size=20),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=1, max_value=2**40),
)
def test_atomic_batch_messages_match_one_message_at_a_time(
    writes: list[tuple[str, str, int, bytes]], first: int
) -> None:
    batch = [(first + i, *write) for i, write in enumerate(writes)]
    expected = [
        to_stream_message(
            guid,
            reply,
            timestamp,
            payload,
            expected_last=sequence - 1 if index == 0 else None,
            batch=batch_headers("b-1", index, len(batch)),
        )
        for index, (sequence, guid, reply, timestamp, payload) in enumerate(batch)
    ]
    assert atomic_batch_messages(batch, "b-1") == expected


def test_a_line_break_in_an_atomic_batch_is_refused() -> None:
    good = (1, "g1", "", 1, b"")
    for bad in ((2, "g\r\nX: y", "", 1, b""), (2, "g2", "r\n", 1, b"")):
        with pytest.raises(ValueError, match="a line break"):
            atomic_batch_messages([good, bad], "b")


@pytest.mark.slow
async def test_an_existing_stream_is_ensured_without_a_metadata_leader(
    monitored_cluster: tuple[list[NatsProc], list[int]],
) -> None:
    """Promotion ensures every channel's stream while JetStream elects a new metadata
    leader (4-9 s after the old one died with the serving node): a stream that exists
    with its limits is read from its own leader; only creating or updating one needs the
    metadata leader."""
    servers, http_ports = monitored_cluster
    names = [f"js{index + 1}" for index in range(3)]
    meta = metadata_leader(http_ports[0])
    survivor = servers[(names.index(meta) + 1) % 3][1]
    config = stream_config(new_cluster(), "orders", UNLIMITED, replicas=3)
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
    """Seen in a three-node failover (tests/cluster): the serving node led the channel's
    stream and died right after its last writes were committed. JetStream's metadata
    leader answered the promoted node's create at once from its own replica, which had
    not applied those writes: an empty stream. Only the stream leader's state counts:
    ensure waits for the new leader, which has every committed write."""
    servers, http_ports = monitored_cluster
    names = [f"js{index + 1}" for index in range(3)]
    meta = names.index(metadata_leader(http_ports[0]))
    config = stream_config(new_cluster(), "orders", UNLIMITED, replicas=3)
    first = servers[(meta + 1) % 3][1]
    async with connected(first) as conn:
        state = await ensure_stream(conn, config)
        await lead_elsewhere(first, config["name"], avoid=names[meta])
        leader = names.index((await stream_replicas(conn, config["name"]))[0])
    survivor = next(i for i in range(3) if i not in (meta, leader))
    async with connected(servers[survivor][1]) as conn:
        writer = StreamWriter(conn, subject=config["subjects"][0], last_sequence=state.last_seq)
        servers[meta][0].send_signal(signal.SIGSTOP)  # its replica misses the writes
        try:
            write(writer, 1, 10)
            assert all(r.ok for r in await writer.flush())  # the leader and the survivor
            servers[leader][0].kill()
        finally:
            servers[meta][0].send_signal(signal.SIGCONT)
        state = await ensure_stream(conn, config, leader_timeout=30)
        assert (state.first_seq, state.last_seq) == (1, 10)
