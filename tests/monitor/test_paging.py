"""Paging, query parsing and JSON details of ``/streaming/*``, and ``/metrics`` without a
channel cap, on an in-process server (real NATS, real HTTP) with many objects."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stanpkg.monitor.gojson import go_json
from stanpkg.monitor.pacing import gc_paused
from tests.monitor.conftest import Reply, async_request, monitored
from tests.server.conftest import make_plan
from tests.server.stan_client import StanClient

INT64_MAX = 2**63 - 1
CHANNELS = [f"ch.{i:02d}" for i in range(7)]
CLIENTS = [f"c{i}" for i in range(5)]


def doc_of(reply: Reply) -> Any:
    assert reply.status == 200, reply.text
    doc = json.loads(reply.text)
    assert reply.text == go_json(doc)
    return doc


async def populate(url: str, cluster_id: str) -> list[StanClient]:
    clients = [await StanClient.connect(url, cluster_id, cid) for cid in reversed(CLIENTS)]
    for name in reversed(CHANNELS):
        await clients[0].publish(name, b"x")
    for client in clients:
        await client.subscribe(CHANNELS[0])
    return clients


async def test_channel_and_client_paging(nats_url: str) -> None:
    plan = make_plan()
    async with monitored(plan, nats_url) as (_server, base):
        clients = await populate(nats_url, plan.cluster_id)

        async def names(query: str) -> dict[str, Any]:
            doc: dict[str, Any] = doc_of(await async_request(f"{base}/streaming/channelsz{query}"))
            return doc

        cases = {  # query → (offset, limit, names)
            "": (0, 1024, CHANNELS),
            "?offset=2&limit=3": (2, 3, CHANNELS[2:5]),
            "?offset=6&limit=5": (6, 5, CHANNELS[6:]),
            "?offset=7": (7, 1024, []),
            "?offset=100": (100, 1024, []),
            "?offset=-5&limit=-1": (0, 1024, CHANNELS),
            "?offset=abc&limit=xyz": (0, 1024, CHANNELS),
            "?offset=%2B2&limit=0": (2, 1024, CHANNELS[2:]),  # "+2": Atoi accepts a sign
            "?offset=%202&limit=2.0": (0, 1024, CHANNELS),  # " 2", "2.0": syntax errors
            "?offset=1&limit=99999999999999999999": (1, INT64_MAX, CHANNELS[1:]),
            "?offset=99999999999999999999": (INT64_MAX, 1024, []),
            "?offset=-99999999999999999999": (0, 1024, CHANNELS),
            "?offset=1&offset=3&limit=1": (1, 1, CHANNELS[1:2]),  # the first value counts
        }
        for query, (offset, limit, expected) in cases.items():
            doc = await names(query)
            assert (doc["offset"], doc["limit"], doc["total"]) == (offset, limit, 7), query
            assert doc["count"] == len(expected), query
            assert doc.get("names", []) == expected, query
            assert ("names" in doc) == bool(expected), query  # omitted when empty
            assert "channels" not in doc

        doc = await names("?subs=1&offset=5&limit=10")
        assert [c["name"] for c in doc["channels"]] == CHANNELS[5:]
        assert (doc["count"], doc["total"]) == (2, 7) and "names" not in doc
        doc = await names("?subs=1&offset=9")
        assert "channels" not in doc and doc["count"] == 0

        for query, expected in {
            "?offset=1&limit=2": CLIENTS[1:3],
            "?offset=4": CLIENTS[4:],
            "?offset=5": [],
            "?limit=-3": CLIENTS,
        }.items():
            doc = doc_of(await async_request(f"{base}/streaming/clientsz{query}"))
            assert [c["id"] for c in doc["clients"]] == expected, query
            assert "clients" in doc  # an empty page is [] (never omitted)
            assert (doc["count"], doc["total"]) == (len(expected), 5)
        doc = doc_of(await async_request(f"{base}/streaming/clientsz?subs=1&limit=1"))
        assert list(doc["clients"][0]["subscriptions"]) == [CHANNELS[0]]
        for client in clients:
            await client.close()


async def test_empty_server(nats_url: str) -> None:
    async with monitored(make_plan(), nats_url) as (_server, base):
        doc = doc_of(await async_request(f"{base}/streaming/channelsz"))
        assert (doc["count"], doc["total"]) == (0, 0)
        assert "names" not in doc and "channels" not in doc
        doc = doc_of(await async_request(f"{base}/streaming/channelsz?subs=1"))
        assert "names" not in doc and "channels" not in doc
        doc = doc_of(await async_request(f"{base}/streaming/clientsz"))
        assert doc["clients"] == [] and doc["total"] == 0
        assert '"clients": []' in (await async_request(f"{base}/streaming/clientsz")).text
        doc = doc_of(await async_request(f"{base}/streaming/storez"))
        assert "channels" not in doc["limits"]  # no per-channel limits configured
        # No embedded nats-server to forward to: Go's 404.
        reply = await async_request(f"{base}/varz")
        assert (reply.status, reply.text) == (404, "404 page not found\n")


async def test_go_escaping_in_names(nats_url: str) -> None:
    plan = make_plan()
    async with monitored(plan, nats_url) as (_server, base):
        client = await StanClient.connect(nats_url, plan.cluster_id, "esc")
        for name in ("x.<tag&co", "caf\u00e9.\u00fc", "q.\u2028"):
            await client.publish(name, b"")
        reply = await async_request(f"{base}/streaming/channelsz")
        assert '"x.\\u003ctag\\u0026co"' in reply.text
        assert '"caf\u00e9.\u00fc"' in reply.text  # UTF-8, not \u escapes
        assert '"q.\\u2028"' in reply.text
        doc = json.loads(reply.text)
        assert doc["names"] == sorted(["x.<tag&co", "caf\u00e9.\u00fc", "q.\u2028"])
        single = await async_request(f"{base}/streaming/channelsz?channel=x.%3Ctag%26co")
        assert json.loads(single.text)["name"] == "x.<tag&co"
        metrics = (await async_request(f"{base}/metrics")).text
        families = {f.name: f for f in text_string_to_metric_families(metrics)}
        channels = {s.labels["channel"] for s in families["nss_chan_msgs_total"].samples}
        assert channels == {"x.<tag&co", "caf\u00e9.\u00fc", "q.\u2028"}
        await client.close()


async def test_jsonp_callback_is_echoed_verbatim(nats_url: str) -> None:
    async with monitored(make_plan(), nats_url) as (_server, base):
        reply = await async_request(f"{base}/streaming/storez?callback=a%5B0%5D.b")
        assert reply.headers["content-type"] == "application/javascript"
        assert reply.text.startswith("a[0].b({") and reply.text.endswith("})")


@pytest.mark.timeout(90)
async def test_no_channel_cap(nats_url: str) -> None:
    """The exporter stopped at the first 1024 channels; /metrics has them all."""
    count = 1100
    plan = make_plan("-mc", "0")
    async with monitored(plan, nats_url) as (_server, base):
        client = await StanClient.connect(nats_url, plan.cluster_id, "many")
        waiters = [await client.publish_async(f"many.{i:04d}", b"m") for i in range(count)]
        acks = await asyncio.wait_for(asyncio.gather(*waiters), 30)
        assert not any(ack.error for ack in acks)
        text = (await async_request(f"{base}/metrics")).text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert len(families["nss_chan_msgs_total"].samples) == count
        assert len(families["nss_chan_last_seq"].samples) == count
        doc = doc_of(await async_request(f"{base}/streaming/channelsz"))
        assert (doc["count"], doc["limit"], doc["total"]) == (1024, 1024, count)
        doc = doc_of(await async_request(f"{base}/streaming/channelsz?limit=5000&subs=1"))
        assert doc["count"] == count  # no maximum page size
        await client.close()


async def test_garbage_collection_resumes_after_big_answers(nats_url: str) -> None:
    plan = make_plan()
    async with monitored(plan, nats_url) as (_server, base):
        clients = await populate(nats_url, plan.cluster_id)
        assert gc.isenabled()
        paths = ["/metrics", "/streaming/channelsz?subs=1", "/streaming/clientsz?subs=1"]
        replies = await asyncio.gather(*(async_request(base + path) for path in paths * 3))
        assert all(reply.status == 200 for reply in replies)
        assert gc.isenabled()
        for client in clients:
            await client.close()


def test_gc_pauses_nest() -> None:
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
