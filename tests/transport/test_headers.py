"""NATS headers on NatsConnection against a real nats-server: HPUB out, HMSG in, status
messages, and the same header blocks as nats-py (the reference for the format)."""

from __future__ import annotations

import asyncio

import nats
import pytest

from stanpkg.transport import BadSubjectError, MaxPayloadError, NatsConnection, NoRespondersError
from stanpkg.transport.connection import HeaderMsgHandler, decode_headers, encode_headers
from tests.transport.conftest import NatsProcess

Received = list[tuple[str, str, bytes, bytes]]


def header_collector() -> tuple[Received, HeaderMsgHandler]:
    got: Received = []

    def handler(subject: str, reply: str, headers: bytes, payload: bytes) -> None:
        got.append((subject, reply, headers, payload))

    return got, handler


def test_encode_decode() -> None:
    block = encode_headers({"Nats-Msg-Id": "abc", "Stan-Reply": "_INBOX.x"})
    assert block == b"NATS/1.0\r\nNats-Msg-Id: abc\r\nStan-Reply: _INBOX.x\r\n\r\n"
    assert decode_headers(block) == (0, {"Nats-Msg-Id": "abc", "Stan-Reply": "_INBOX.x"})
    assert encode_headers({}) == b"NATS/1.0\r\n\r\n"
    assert decode_headers(b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\n\r\n") == (
        204,
        {"Nats-Num-Pending": "0"},
    )
    assert decode_headers(b"NATS/1.0 503\r\n\r\n") == (503, {})


@pytest.mark.parametrize(
    "headers", [{"Bad Key": "v"}, {"Key:": "v"}, {"": "v"}, {"K": "a\r\nB: c"}, {"K": "a\n"}]
)
def test_encode_refuses_what_would_break_the_block(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        encode_headers(headers)


async def test_round_trip(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url, name="t")
    with_headers, handler = header_collector()
    nc.subscribe("h.*", handler, with_headers=True)
    plain: list[tuple[str, str, bytes]] = []
    nc.subscribe("h.*", lambda s, r, p: plain.append((s, r, p)))
    block = encode_headers({"Nats-Msg-Id": "guid-1", "Stan-Timestamp": "123"})
    nc.publish_with_headers("h.a", block, b"payload", reply="answer.here")
    nc.publish_with_headers("h.b", block, b"")  # empty payload: not a status message
    nc.publish("h.c", b"no headers")
    await nc.flush()
    assert with_headers == [
        ("h.a", "answer.here", block, b"payload"),
        ("h.b", "", block, b""),
        ("h.c", "", b"", b"no headers"),
    ]
    assert plain == [
        ("h.a", "answer.here", b"payload"),
        ("h.b", "", b""),
        ("h.c", "", b"no headers"),
    ]
    await nc.close()


async def test_no_responders_status(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url, name="t")
    with pytest.raises(NoRespondersError):  # the request mux still sees the 503
        await nc.request("nobody.home", b"?", timeout=2)
    got, handler = header_collector()
    inbox = nc.new_inbox()
    nc.subscribe(inbox, handler, with_headers=True)
    nc.publish_with_headers("nobody.home", encode_headers({"K": "v"}), b"?", reply=inbox)
    await nc.flush()
    for _ in range(100):
        if got:
            break
        await asyncio.sleep(0.01)
    [(subject, reply, headers, payload)] = got
    assert (subject, reply, payload) == (inbox, "", b"")
    assert decode_headers(headers)[0] == 503
    await nc.close()


async def test_big_headers_and_max_payload(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url, name="t")
    got, handler = header_collector()
    nc.subscribe("big", handler, with_headers=True)
    value = "x" * 200_000  # larger than one socket read and than _FLUSH_AT
    block = encode_headers({"Big": value})
    nc.publish_with_headers("big", block, b"p" * 1000)
    await nc.flush()
    [(_, _, headers, payload)] = got
    assert decode_headers(headers) == (0, {"Big": value}) and payload == b"p" * 1000
    for reply in ("a b", "x\ty", " "):
        with pytest.raises(BadSubjectError):
            nc.publish_with_headers("big", block, b"", reply=reply)
    with pytest.raises(BadSubjectError):
        nc.publish_with_headers("bad subject", block, b"")
    with pytest.raises(MaxPayloadError):  # headers count towards max_payload
        nc.publish_with_headers("big", encode_headers({"Big": "x" * nc.max_payload}), b"")
    await nc.flush()  # the connection is still fine
    await nc.close()


async def test_same_format_as_nats_py(nats_server: NatsProcess) -> None:
    ours = await NatsConnection.connect(nats_server.url, name="ours")
    theirs = await nats.connect(nats_server.url)
    try:
        got, handler = header_collector()
        ours.subscribe("from.them", handler, with_headers=True)
        await ours.flush()
        sub = await theirs.subscribe("from.us")
        await theirs.flush()
        await theirs.publish("from.them", b"1", headers={"A": "b", "Nats-Msg-Id": "id"})
        await theirs.flush()
        ours.publish_with_headers("from.us", encode_headers({"C": "d e"}), b"2")
        await ours.flush()
        msg = await sub.next_msg(timeout=2)
        assert msg.headers == {"C": "d e"} and msg.data == b"2"
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.01)
        [(_, _, headers, payload)] = got
        assert decode_headers(headers) == (0, {"A": "b", "Nats-Msg-Id": "id"})
        assert payload == b"1"
    finally:
        await theirs.close()
        await ours.close()


async def test_a_run_with_headers_arrives_as_single_publishes_do(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url, name="t")
    got, handler = header_collector()
    nc.subscribe("run", handler, with_headers=True)
    blocks = [encode_headers({"Nats-Batch-Sequence": str(i)}) for i in range(1, 4)]
    messages = [(block, b"m%d" % i) for i, block in enumerate(blocks)]
    nc.publish_run_with_headers("run", messages, "commit.reply")
    nc.publish_run_with_headers("run", messages[:1], "")  # no reply at all
    nc.publish_run_with_headers("run", [], "x")  # nothing
    await nc.flush()
    assert got == [
        ("run", "", blocks[0], b"m0"),
        ("run", "", blocks[1], b"m1"),
        ("run", "commit.reply", blocks[2], b"m2"),
        ("run", "", blocks[0], b"m0"),
    ]
    # All or nothing: a bad reply or one payload too large queues none of the run.
    sent = nc.out_msgs
    with pytest.raises(BadSubjectError):
        nc.publish_run_with_headers("run", messages, "a b")
    too_big = (encode_headers({"Big": "x" * nc.max_payload}), b"")
    with pytest.raises(MaxPayloadError):
        nc.publish_run_with_headers("run", [*messages, too_big], "r")
    assert nc.out_msgs == sent
    await nc.flush()
    assert len(got) == 4
    await nc.close()
