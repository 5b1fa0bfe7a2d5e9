"""NatsConnection against a real nats-server: pub/sub, queues, requests, limits, auth."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from stanpkg.transport import (
    AuthorizationError,
    BadSubjectError,
    ConnectionClosedError,
    MaxPayloadError,
    NatsConnection,
    NatsTimeoutError,
    NoRespondersError,
    NoServersError,
)
from stanpkg.transport.auth import NKeySeed, parse_credentials
from tests.transport.conftest import NatsProcess, StartNats, free_port

Received = list[tuple[str, str, bytes]]


def collector() -> tuple[Received, object]:
    got: Received = []

    def handler(subject: str, reply: str, payload: bytes) -> None:
        got.append((subject, reply, payload))

    return got, handler


async def wait_until(predicate: object, timeout: float = 5.0) -> None:
    assert callable(predicate)
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


async def test_pub_sub_with_reply(nats_server: NatsProcess, loop_kind: str) -> None:
    nc = await NatsConnection.connect(nats_server.url, name="t")
    got, handler = collector()
    nc.subscribe("foo.*", handler)  # type: ignore[arg-type]
    nc.publish("foo.a", b"one")
    nc.publish("foo.b", b"two", reply="answer.here")
    nc.publish("bar", b"not for us")
    await nc.flush()
    assert got == [("foo.a", "", b"one"), ("foo.b", "answer.here", b"two")]
    assert nc.is_connected and nc.client_url == nats_server.url
    assert nc.server_info["max_payload"] == nc.max_payload == 1024 * 1024
    await nc.close()
    assert not nc.is_connected


async def test_two_connections_order_preserved(nats_server: NatsProcess, loop_kind: str) -> None:
    sub = await NatsConnection.connect(nats_server.url)
    pub = await NatsConnection.connect(nats_server.url)
    got, handler = collector()
    sub.subscribe("seq", handler)  # type: ignore[arg-type]
    await sub.flush()
    payloads = [os.urandom(i % 700) for i in range(20000)]
    for i, payload in enumerate(payloads):
        pub.publish("seq", payload)
        if i % 1000 == 0:
            await asyncio.sleep(0)
    await pub.flush()
    await wait_until(lambda: len(got) == len(payloads))
    assert [p for _, _, p in got] == payloads
    assert sub.in_msgs == len(payloads) and pub.out_msgs == len(payloads)
    await pub.close()
    await sub.close()


async def test_publish_run_and_each_send_in_order_or_nothing(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url)
    got, handler = collector()
    nc.subscribe("run.*", handler)  # type: ignore[arg-type]
    await nc.flush()
    payloads = [os.urandom(i * 37 % 5000) for i in range(3000)]  # past the 64 KB write mark
    nc.publish_run("run.a", payloads[:2000])
    nc.publish_each([("run.b" if i % 2 else "run.c", p) for i, p in enumerate(payloads[2000:])])
    too_big = b"x" * (nc.max_payload + 1)
    with pytest.raises(MaxPayloadError):
        nc.publish_run("run.a", [b"lost", too_big])
    with pytest.raises(MaxPayloadError):
        nc.publish_each([("run.a", b"lost"), ("run.a", too_big)])
    with pytest.raises(BadSubjectError):
        nc.publish_each([("run.a", b"lost"), ("bad subject", b"x")])
    with pytest.raises(BadSubjectError):
        nc.publish_run("", [b"lost"])
    nc.publish_run("run.a", [])
    await nc.flush()
    await wait_until(lambda: len(got) == len(payloads))
    assert [p for _, _, p in got] == payloads
    assert [s for s, _, _ in got[1999:2003]] == ["run.a", "run.c", "run.b", "run.c"]
    assert nc.out_msgs == len(payloads)
    await nc.close()
    with pytest.raises(ConnectionClosedError):
        nc.publish_run("run.a", [b"x"])
    with pytest.raises(ConnectionClosedError):
        nc.publish_each([("run.a", b"x")])


async def test_queue_group_delivers_each_message_once(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url)
    got_a, handler_a = collector()
    got_b, handler_b = collector()
    nc.subscribe("work", handler_a, queue="workers")  # type: ignore[arg-type]
    nc.subscribe("work", handler_b, queue="workers")  # type: ignore[arg-type]
    for i in range(200):
        nc.publish("work", str(i).encode())
    await nc.flush()
    await wait_until(lambda: len(got_a) + len(got_b) == 200)
    assert sorted(int(p) for _, _, p in got_a + got_b) == list(range(200))
    await nc.close()


async def test_request_reply_no_responders_and_timeout(nats_server: NatsProcess) -> None:
    server = await NatsConnection.connect(nats_server.url)
    client = await NatsConnection.connect(nats_server.url)
    server.subscribe("echo", lambda s, r, p: server.publish(r, p.upper()))
    server.subscribe("silent", lambda s, r, p: None)
    await server.flush()
    answers = await asyncio.gather(*(client.request("echo", b"x%d" % i, 2.0) for i in range(50)))
    assert answers == [b"X%d" % i for i in range(50)]
    with pytest.raises(NoRespondersError, match="no responders available"):
        await client.request("nobody.home", b"", 2.0)
    with pytest.raises(NatsTimeoutError, match="nats: timeout"):
        await client.request("silent", b"", 0.2)
    assert client.new_inbox().startswith("_INBOX.") and len(client.new_inbox()) == 29
    await client.close()
    await server.close()


async def test_unsubscribe_and_max_msgs(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url)
    got, handler = collector()
    sid = nc.subscribe("a", handler)  # type: ignore[arg-type]
    limited_got, limited = collector()
    limited_sid = nc.subscribe("b", limited)  # type: ignore[arg-type]
    nc.unsubscribe(limited_sid, max_msgs=3)
    nc.publish("a", b"1")
    await nc.flush()
    nc.unsubscribe(sid)
    nc.unsubscribe(sid)  # unknown sids are ignored
    for i in range(10):
        nc.publish("a", b"after")
        nc.publish("b", b"%d" % i)
    await nc.flush()
    assert got == [("a", "", b"1")]
    assert [p for _, _, p in limited_got] == [b"0", b"1", b"2"]
    await nc.close()


async def test_payload_limits(start_nats: StartNats) -> None:
    server = start_nats("max_payload: 65536")
    nc = await NatsConnection.connect(server.url)
    assert nc.max_payload == 65536
    got, handler = collector()
    nc.subscribe("big", handler)  # type: ignore[arg-type]
    exact = os.urandom(65536)
    nc.publish("big", exact)
    nc.publish("big", exact[:-1])
    with pytest.raises(MaxPayloadError, match="nats: maximum payload exceeded"):
        nc.publish("big", exact + b"!")
    await nc.flush()
    await wait_until(lambda: len(got) == 2)
    assert [p for _, _, p in got] == [exact, exact[:-1]]
    await nc.close()


async def test_invalid_subjects(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url)
    for bad in ("", "with space", "tab\there", "new\r\nline"):
        with pytest.raises(BadSubjectError, match=r"^nats: invalid subject$"):
            nc.publish(bad, b"")
        with pytest.raises(BadSubjectError):
            nc.subscribe(bad, lambda s, r, p: None)
    with pytest.raises(BadSubjectError):
        nc.publish("ok", b"", reply="bad reply")
    with pytest.raises(BadSubjectError):
        nc.subscribe("ok", lambda s, r, p: None, queue="bad queue")
    await nc.close()


async def test_headers_from_other_clients_are_tolerated(nats_server: NatsProcess) -> None:
    import nats

    nc = await NatsConnection.connect(nats_server.url)
    got, handler = collector()
    nc.subscribe("h", handler)  # type: ignore[arg-type]
    await nc.flush()
    other = await nats.connect(nats_server.url)
    await other.publish("h", b"payload", reply="r.1", headers={"Key": "Value"})
    await other.publish("h", b"plain")
    await other.flush()
    await wait_until(lambda: len(got) == 2)
    assert got == [("h", "r.1", b"payload"), ("h", "", b"plain")]
    await other.close()
    await nc.close()


async def test_handler_exception_goes_to_on_error(nats_server: NatsProcess) -> None:
    errors: list[Exception] = []
    nc = await NatsConnection.connect(nats_server.url, on_error=errors.append)
    got, handler = collector()

    def boom(subject: str, reply: str, payload: bytes) -> None:
        raise ValueError("bad handler")

    nc.subscribe("x", boom)
    nc.subscribe("x", handler)  # type: ignore[arg-type]
    nc.publish("x", b"1")
    await nc.flush()
    assert [str(e) for e in errors] == ["bad handler"]
    assert len(got) == 1 and nc.is_connected
    await nc.close()


async def test_drain_delivers_in_flight_then_closes(nats_server: NatsProcess) -> None:
    closed: list[Exception | None] = []
    nc = await NatsConnection.connect(nats_server.url, on_closed=closed.append)
    other = await NatsConnection.connect(nats_server.url)
    got, handler = collector()
    nc.subscribe("d", handler)  # type: ignore[arg-type]
    await nc.flush()
    for _ in range(500):
        other.publish("d", b"m")
    await other.flush()
    await nc.drain()
    assert len(got) == 500 and closed == [None]
    with pytest.raises(ConnectionClosedError, match="nats: connection closed"):
        nc.publish("d", b"late")
    with pytest.raises(ConnectionClosedError):
        await nc.flush()
    await other.close()


async def test_connection_refused_is_no_servers() -> None:
    port = free_port()
    with pytest.raises(NoServersError, match=r"^nats: no servers available for connection$"):
        await NatsConnection.connect(f"nats://127.0.0.1:{port},127.0.0.1:{port}")


async def test_second_url_used_when_first_is_down(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(f"nats://127.0.0.1:{free_port()},{nats_server.url}")
    assert nc.client_url == nats_server.url
    await nc.close()


async def test_user_password_auth(start_nats: StartNats) -> None:
    server = start_nats('authorization { user: "alice", password: "s3cret" }')
    nc = await NatsConnection.connect(server.url, user="alice", password="s3cret")
    await nc.flush()
    await nc.close()
    in_url = await NatsConnection.connect(f"nats://alice:s3cret@127.0.0.1:{server.port}")
    await in_url.close()
    with pytest.raises(AuthorizationError, match=r"^nats: authorization violation$"):
        await NatsConnection.connect(server.url, user="alice", password="wrong")
    with pytest.raises(AuthorizationError):
        await NatsConnection.connect(server.url)


async def test_token_auth(start_nats: StartNats) -> None:
    server = start_nats('authorization { token: "t0k3n" }')
    nc = await NatsConnection.connect(server.url, token="t0k3n")
    await nc.close()
    nc = await NatsConnection.connect(f"nats://t0k3n@127.0.0.1:{server.port}")
    await nc.close()
    with pytest.raises(AuthorizationError, match="nats: authorization violation"):
        await NatsConnection.connect(server.url, token="nope")


async def test_nkey_auth(start_nats: StartNats, tmp_path: Path) -> None:
    seed = NKeySeed.generate_user(os.urandom(32))
    assert NKeySeed.decode(seed.encode()) == seed and seed.encode().startswith("SU")
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed.encode() + "\n")
    server = start_nats(f'authorization {{ users: [ {{ nkey: "{seed.public_key()}" }} ] }}')
    nc = await NatsConnection.connect(server.url, nkey_seed_file=str(seed_file))
    await nc.flush()
    await nc.close()
    other = NKeySeed.generate_user(os.urandom(32))
    seed_file.write_text(other.encode())
    with pytest.raises(AuthorizationError):
        await NatsConnection.connect(server.url, nkey_seed_file=str(seed_file))


def test_credentials_file_parsing() -> None:
    text = """-----BEGIN NATS USER JWT-----
eyJhbGciOiJlZDI1NTE5In0.payload.sig
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.

-----BEGIN USER NKEY SEED-----
SUAKYRHVIOREXV7EUZTBHUHL7NUMHPMAS7QMDU3GTVUKF7VQKDFGSRHQS4
------END USER NKEY SEED------
"""
    assert parse_credentials(text) == (
        "eyJhbGciOiJlZDI1NTE5In0.payload.sig",
        "SUAKYRHVIOREXV7EUZTBHUHL7NUMHPMAS7QMDU3GTVUKF7VQKDFGSRHQS4",
    )


async def test_backpressure_pending_bytes(nats_server: NatsProcess) -> None:
    nc = await NatsConnection.connect(nats_server.url)
    for _ in range(100):
        nc.publish("void", b"x" * 100)
    assert nc.pending_bytes >= 100 * 100
    await nc.flush()
    assert nc.pending_bytes == 0
    await nc.close()


async def test_backpressure_pauses_linked_readers(nats_server: NatsProcess) -> None:
    writer = await NatsConnection.connect(nats_server.url)
    reader = await NatsConnection.connect(nats_server.url)
    writer.pause_reading_with(reader)
    assert reader._transport is not None and writer._transport is not None
    writer._writes_paused(True)  # what the transport's pause_writing() triggers
    assert not reader._transport.is_reading() and not writer._transport.is_reading()
    writer._writes_paused(False)
    assert reader._transport.is_reading() and writer._transport.is_reading()
    await reader.close()
    await writer.close()
