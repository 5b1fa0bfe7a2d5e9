"""Connect, close and ping requests, with the reference's exact replies."""

from __future__ import annotations

import asyncio

import nats

from stanpkg.proto import protocol_pb2 as pb
from tests.server.conftest import make_plan, running
from tests.server.stan_client import StanClient, StanError


async def _raw_connect(
    nc: nats.NATS, discover: str, req: pb.ConnectRequest | bytes
) -> pb.ConnectResponse:
    payload = req if isinstance(req, bytes) else req.SerializeToString()
    msg = await nc.request(discover, payload, timeout=2)
    return pb.ConnectResponse.FromString(msg.data)


async def test_connect_protocol_1_returns_subjects_and_echoes_pings(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(
            nats_url, plan.cluster_id, "me", ping_interval=7, ping_max_out=3
        )
        resp = client.resp
        cid = plan.cluster_id
        assert resp.pubPrefix == f"_STAN.pub.{cid}"
        assert resp.subRequests == f"_STAN.sub.{cid}"
        assert resp.unsubRequests == f"_STAN.unsub.{cid}"
        assert resp.closeRequests == f"_STAN.close.{cid}"
        assert resp.subCloseRequests == f"_STAN.subclose.{cid}"
        assert resp.pingRequests == f"_STAN.discover.{cid}.pings"
        assert (resp.pingInterval, resp.pingMaxOut, resp.protocol) == (7, 3, 1)
        await client.close()


async def test_connect_protocol_0_omits_ping_fields(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "old", protocol=0)
        assert client.resp.protocol == 1
        assert client.resp.pingRequests == ""
        assert client.resp.pingInterval == 0
        # Protocol 0 publishers are validated by client ID.
        await client.publish("foo", b"hello")
        await client.close()


async def test_connect_errors(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        nc = await nats.connect(nats_url)
        discover = f"_STAN.discover.{plan.cluster_id}"
        resp = await _raw_connect(nc, discover, b"\xff\xff\xff garbage")
        assert resp.error == "stan: invalid connection request"
        assert resp.pubPrefix == ""
        resp = await _raw_connect(nc, discover, pb.ConnectRequest(clientID="a"))
        assert resp.error == "stan: invalid connection request"
        for bad in ("", "a.b", "a b", "é"):
            resp = await _raw_connect(
                nc, discover, pb.ConnectRequest(clientID=bad, heartbeatInbox="hb")
            )
            assert resp.error == (
                "stan: invalid clientID: only alphanumeric and `-` or `_` characters allowed"
            ), bad
        await nc.close()


async def test_duplicate_client_alive_is_rejected(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        first = await StanClient.connect(nats_url, plan.cluster_id, "dup")
        with_error = None
        try:
            await StanClient.connect(nats_url, plan.cluster_id, "dup")
        except StanError as exc:
            with_error = str(exc)
        assert with_error == "stan: clientID already registered"
        assert first.heartbeats >= 1  # the server probed the registered client
        await first.close()


async def test_duplicate_client_dead_is_replaced(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        first = await StanClient.connect(nats_url, plan.cluster_id, "dup")
        sub = await first.subscribe("foo")
        first.answer_heartbeats = False
        loop = asyncio.get_running_loop()
        started = loop.time()
        second = await StanClient.connect(nats_url, plan.cluster_id, "dup")
        assert loop.time() - started >= 0.45  # waited for the 500 ms probe
        assert server.clients.get("dup") is not None
        assert server.clients.get("dup").conn_id == second.conn_id  # type: ignore[union-attr]
        # The old client's plain subscription was removed with it.
        assert not server.handlers.channels.get("foo").plain  # type: ignore[union-attr]
        # The old connID is no longer valid for publishing or pinging.
        ack = await first.raw_publish(first.pub_msg("foo", b"x"))
        assert ack.error == "stan: invalid publish request"
        resp = pb.PingResponse.FromString(await first.ping())
        assert resp.error == "client has been replaced or is no longer registered"
        del sub
        await second.close()
        await first.nc.close()


async def test_concurrent_duplicate_check_fails_fast(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        first = await StanClient.connect(nats_url, plan.cluster_id, "dup")
        first.answer_heartbeats = False
        results = await asyncio.gather(
            StanClient.connect(nats_url, plan.cluster_id, "dup"),
            StanClient.connect(nats_url, plan.cluster_id, "dup"),
            return_exceptions=True,
        )
        errors = [str(r) for r in results if isinstance(r, StanError)]
        assert errors == ["stan: clientID already registered"]
        for r in results:
            if isinstance(r, StanClient):
                await r.close()
        await first.nc.close()


async def test_other_requests_served_during_duplicate_probe(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        first = await StanClient.connect(nats_url, plan.cluster_id, "dup")
        first.answer_heartbeats = False
        probe = asyncio.ensure_future(StanClient.connect(nats_url, plan.cluster_id, "dup"))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        other = await StanClient.connect(nats_url, plan.cluster_id, "other")
        assert loop.time() - started < 0.3
        await (await probe).close()
        await other.close()
        await first.nc.close()


async def test_close_request(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        client = await StanClient.connect(nats_url, plan.cluster_id, "c1")
        await client.close(keep_nats=True)
        assert server.clients.get("c1") is None
        raw = await client.request(
            client.resp.closeRequests, pb.CloseRequest(clientID="c1").SerializeToString()
        )
        assert pb.CloseResponse.FromString(raw).error == "stan: unknown clientID"
        raw = await client.request(client.resp.closeRequests, b"\xff\xfe")
        assert pb.CloseResponse.FromString(raw).error == "stan: invalid close request"
        await client.nc.close()


async def test_ping(nats_url: str) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        client = await StanClient.connect(nats_url, plan.cluster_id, "p1")
        assert await client.ping() == b""  # OK is a zero-byte payload
        bad = pb.Ping(connID=b"unknown").SerializeToString()
        raw = await client.request(client.resp.pingRequests, bad)
        assert pb.PingResponse.FromString(raw).error == (
            "client has been replaced or is no longer registered"
        )
        # Empty or undecodable pings get no reply at all.
        for payload in (b"", b"\xff\xff\xff"):
            try:
                await client.request(client.resp.pingRequests, payload, timeout=0.3)
            except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
                pass
            else:
                raise AssertionError("ping without a valid payload was answered")
        await client.close()
