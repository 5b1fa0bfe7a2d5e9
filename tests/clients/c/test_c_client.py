"""The official NATS C client's streaming API (nats.c / libnats) against the server.

Each test runs one scenario of stan_scenarios.c (see conftest.py) while the server runs in
this event loop, or, for the FILE store restart, as a ``stanpkg run`` process.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.clients.c.conftest import CClient
from tests.server.conftest import make_plan, new_cluster_id, running
from tests.stores.file.helpers import running_server

pytestmark = pytest.mark.integration

# Errors set by nats.c carry the place they were set: "(stan/sub.c:470): <text>".
_LOCATION = re.compile(r"^\([^()]*:\d+\): ")


def error_text(reported: str | None) -> str | None:
    """The error text without the library's source location prefix."""
    return None if reported is None else _LOCATION.sub("", reported)


def seqs(msgs: list[dict[str, Any]]) -> list[tuple[int, str, bool]]:
    return [(m["seq"], m["data"], m["redelivered"]) for m in msgs]


async def test_publish_subscribe_with_pings(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        result = await c_client.run("pubsub", nats_url, plan.cluster_id)
        assert server.handlers.publisher.in_msgs == 100
    # 50 PublishAsync calls: each ack handler called once, no error, 50 distinct guids
    assert result["acks"] == {
        "count": 50,
        "errors": 0,
        "not_exactly_once": 0,
        "empty_guids": 0,
        "distinct_guids": 50,
    }
    expected_data = [f"s{i}" for i in range(50)] + [f"a{i}" for i in range(50)]
    for key in ("live", "all"):  # NewOnly before publishing, DeliverAllAvailable after
        got = result[key]
        assert got["seqs"] == list(range(1, 101)), key
        assert got["data"] == expected_data, key
        assert got["redelivered"] == 0, key
        assert got["timestamps_in_range"] == 100, key  # Unix ns, near the client's clock
        assert got["timestamps_ordered"] is True, key
    assert result["lost"] is None


async def test_client_pings_keep_the_connection(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        # 1 s PINGs, max 3 outstanding, 4.5 s connected: unanswered PINGs would lose it
        result = await c_client.run("pings", nats_url, plan.cluster_id)
    assert result == {"lost": None}


async def test_start_positions(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        # m1..m3, 2 s pause (the "middle" time is taken in the pause), m4, m5
        result = await c_client.run("starts", nats_url, plan.cluster_id)
    assert result == {
        "all": [1, 2, 3, 4, 5],
        "last": [5],
        "seq3": [3, 4, 5],
        "seq100": [],
        "delta60s": [1, 2, 3, 4, 5],
        "deltaMiddle": [4, 5],
        "timeMiddle": [4, 5],
        "newOnly": [],
        "newOnlyThenPublish": [6],
        "seq100ThenPublish": [6],
    }


async def test_durable_redelivers_unacked_after_reconnect(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await c_client.run("durable", nats_url, plan.cluster_id)
    # max in flight 3, 1 and 2 acked: 3, 4, 5 pending, 6 held back
    assert seqs(result["first"]) == [(n, f"d{n}", False) for n in range(1, 6)]
    # connection closed without closing the subscription, reconnected, same durable:
    # the unacked ones first (redelivered), then 6, then d7 published after the resume
    assert seqs(result["resumed"]) == [
        (3, "d3", True),
        (4, "d4", True),
        (5, "d5", True),
        (6, "d6", False),
        (7, "d7", False),
    ]


async def test_ack_wait_redelivery(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await c_client.run("ackwait", nats_url, plan.cluster_id)
    # not acked: redelivered after the 1 s ack wait; acked then: no third delivery
    assert seqs(result["deliveries"]) == [(1, "once", False), (1, "once", True)]
    assert 500 <= result["gap_ms"] < 10_000  # about 1 s; generous for a loaded machine


async def test_queue_group(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await c_client.run("queue", nats_url, plan.cluster_id)
    a, b = result["a"], result["b"]
    assert a and b, "both members of the group get messages"
    assert sorted(a + b) == list(range(1, 21))  # every message exactly once
    assert a == sorted(a) and b == sorted(b)
    # member C (manual acks, never acks) leaves by closing its connection: the
    # remaining member B gets C's messages redelivered
    held = result["held"]
    assert held, "the manual-ack member got nothing"
    first_time = [seq for seq, redelivered in result["b_after"] if not redelivered]
    moved = [seq for seq, redelivered in result["b_after"] if redelivered]
    assert sorted(moved) == sorted(held)
    assert sorted(first_time + held) == list(range(21, 27))
    # two members of one group on the same connection
    same1, same2 = result["same1"], result["same2"]
    assert same1 and same2
    assert sorted(same1 + same2) == list(range(1, 11))


async def test_server_errors_reach_the_client(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await c_client.run("errors", nats_url, plan.cluster_id)
    invalid_publish = "stan: invalid publish request"
    case_error = (
        'rejecting channel "{}" because channel "casing" alreay exists '
        "(different cases not allowed)"
    )
    assert {key: error_text(value) for key, value in result.items()} == {
        "duplicate": "stan: clientID already registered",
        "invalidClientID": (
            "stan: invalid clientID: only alphanumeric and `-` or `_` characters allowed"
        ),
        "publishWildcard": invalid_publish,
        "publishFullWildcard": invalid_publish,
        "publishSlash": invalid_publish,
        "publishAsyncWildcard": invalid_publish,  # through the ack handler
        # empty tokens make the NATS subject invalid: nats-server drops the PubMsg,
        # the client times out (1 s ack wait) and the connection stays usable
        "publishDoubleDot": "publish ack timeout",
        "publishTrailingDot": "publish ack timeout",
        "publishAfterDropped": None,
        "publishCase": case_error.format("Casing"),
        "subscribeCase": case_error.format("CASING"),
        "subscribeWildcard": "stan: invalid subject",
        "subscribeDoubleDot": "stan: invalid subject",
        "ackWaitBelow1s": "stan: invalid ack wait time, should be >= 1s",
        "durableQueueColon": (
            "stan: durable name of a durable queue subscriber can't contain the character ':'"
        ),
        "plainDurableColon": None,  # only durable queue names are checked
        "duplicateDurable": "stan: duplicate durable registration",
    }


async def test_durable_unsubscribe_vs_close(nats_url: str, c_client: CClient) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await c_client.run("unsub-durable", nats_url, plan.cluster_id)
    assert result == {
        "first": [1, 2],
        "afterClose": [3],  # resumed: DeliverAllAvailable ignored
        "afterUnsubscribe": [1, 2, 3],  # a new durable: DeliverAllAvailable honoured
        "newOnlyAfterUnsubscribe": [],
    }


def test_file_store_durable_survives_restart(tmp_path: Path, c_client: CClient) -> None:
    cluster_id = new_cluster_id()
    args = ["-st", "file", "--dir", str(tmp_path / "store"), "-cid", cluster_id]
    with running_server(args, tmp_path / "first.log") as server:
        before = c_client.run_sync("restart-before", server.url, cluster_id)
    # f1..f3 published synchronously, f4 and f5 asynchronously; 1..3 acked, connection closed
    assert seqs(before["before"]) == [(n, f"f{n}", False) for n in range(1, 6)]
    with running_server(args, tmp_path / "second.log") as server:
        after = c_client.run_sync("restart-after", server.url, cluster_id)
        log = server.log()
    assert seqs(after["resumed"]) == [(4, "f4", True), (5, "f5", True), (6, "f6", False)]
    assert seqs(after["all"]) == [(n, f"f{n}", False) for n in range(1, 7)]
    assert "[ERR]" not in log and "Traceback" not in log
