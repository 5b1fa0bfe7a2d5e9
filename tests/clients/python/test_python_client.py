"""The real third-party Python client, asyncio-nats-streaming 0.4.0 from PyPI, against the
server (the same checks as tests/server/test_node_client.py does with the Node client).

The client speaks protocol 1 (connID in ConnectRequest and PubMsg, client PINGs). Each
test runs one scenario of stan_scenarios.py in the client's own venv while the server runs
in this event loop (the FILE-store restart test runs ``stanpkg run`` processes instead).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.clients.python.conftest import run_scenario
from tests.server.conftest import make_plan, new_cluster_id, running
from tests.stores.file.helpers import start_server

pytestmark = pytest.mark.integration


async def test_publish_and_subscribe(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        result = await run_scenario(stan_python, "pubsub", nats_url, plan.cluster_id)
        assert server.handlers.publisher.in_msgs == 100
    sync_acks, async_acks = result["sync_acks"], result["async_acks"]
    assert [ack["error"] for ack in sync_acks + async_acks] == [""] * 100
    guids = {ack["guid"] for ack in sync_acks + async_acks}
    assert len(guids) == 100 and "" not in guids
    replay = result["replay"]
    assert [m["seq"] for m in replay] == list(range(1, 101))
    assert [m["data"] for m in replay] == [f"s{i}" for i in range(50)] + [
        f"a{i}" for i in range(50)
    ]
    assert {m["subject"] for m in replay} == {"ps"}
    assert not any(m["redelivered"] or m["count"] for m in replay)
    stamps = [m["ts"] for m in replay]
    assert stamps == sorted(stamps)
    assert result["before"] <= stamps[0] and stamps[-1] <= result["after"]
    assert result["live"] == replay  # the live subscriber got the same messages
    assert result["lost"] == []


async def test_start_positions(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "start_positions", nats_url, plan.cluster_id)
    every = [[i, f"m{i}"] for i in range(1, 6)]
    assert result == {
        "time_delta_1s": every[3:],
        "time_delta_60s": every,
        "all": every,
        "first": every,
        "last": every[4:],
        "seq3": every[2:],
        "seq_past_end": [],
        "new_only": [],
        "new_only_then_publish": [6],
        "last_then_publish": [5, 6],
    }


async def test_durable_resumes_after_reconnect(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "durable_reconnect", nats_url, plan.cluster_id)
    assert result["stalled"] == [[1, False], [2, False]]  # max_inflight=2
    assert result["after_ack"] == [[1, False], [2, False], [3, False]]
    assert result["resumed"] == [
        [2, "d2", True],
        [3, "d3", True],
        [4, "d4", False],
        [5, "d5", False],
        [6, "d6", False],  # published while the durable was offline
    ]
    assert result["resumed_counts"] == [1, 1, 0, 0, 0]


async def test_ack_wait_redelivery(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "ack_wait", nats_url, plan.cluster_id)
    assert result["deliveries"] == [
        {"seq": 1, "data": "once", "redelivered": False, "count": 0},
        {"seq": 1, "data": "once", "redelivered": True, "count": 1},
    ]  # acked on the redelivery: no third delivery
    assert result["gap"] >= 0.95  # ack_wait is 1 s


async def test_queue_group(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "queue", nats_url, plan.cluster_id)
    a, b = result["shared"]["a"], result["shared"]["b"]
    assert a and b, "both members get work"
    assert sorted(a + b) == list(range(1, 21))  # each message to exactly one member
    assert a == sorted(a) and b == sorted(b)
    held = result["held"]
    assert held, "the manual-ack member got nothing"
    assert sorted(result["moved"]) == held  # its unacked messages went to the other member
    assert sorted(held + result["b_new"]) == list(range(21, 27))


async def test_server_errors_reach_the_client(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "errors", nats_url, plan.cluster_id)
    invalid = {"error": "stan: invalid publish request"}
    assert result == {
        "duplicate_client": "stan: clientID already registered",
        "invalid_client_id": (
            "stan: invalid clientID: only alphanumeric and `-` or `_` characters allowed"
        ),
        "invalid_subject": "stan: invalid subject",
        "wildcard_subject": "stan: invalid subject",
        "max_inflight_0": "stan: invalid MaxInflight, should be >= 1",
        "ack_wait_0": "stan: invalid ack wait time, should be >= 1s",
        "duplicate_durable": "stan: duplicate durable registration",
        "durable_queue_name": (
            "stan: durable name of a durable queue subscriber can't contain the character ':'"
        ),
        "publish": {
            "foo/bar": invalid,
            "a*b": invalid,
            "a>b": invalid,
            # An empty token in "_STAN.pub.<id>.foo..bar": nats-server drops the message.
            "foo..bar": {"timeout": True},
            "foo.": {"timeout": True},
            "Casing": {
                "error": 'rejecting channel "Casing" because channel "casing" alreay exists '
                "(different cases not allowed)"
            },
        },
        "valid_after_errors": "",
    }


async def test_durable_unsubscribe_versus_close(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(
            stan_python, "durable_unsubscribe_vs_close", nats_url, plan.cluster_id
        )
    assert result == {
        "first": ["a"],
        "after_close": [["b", False]],  # closed: resumed after "a", start position ignored
        "after_unsubscribe": ["a", "b", "c"],  # unsubscribed: a new durable from the start
        "offline_unsubscribe": "stan: invalid subscription",
        "plain_second_close": "stan: invalid subscription",
    }


async def test_client_pings(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "pings", nats_url, plan.cluster_id)
    assert result == {
        "lost": [],
        # only answered to protocol >= 1 connect requests: the client speaks protocol 1
        "ping_requests": f"_STAN.discover.{plan.cluster_id}.pings",
        "publish_error": "",
    }


async def test_replaced_client_learns_it_from_pings(nats_url: str, stan_python: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario(stan_python, "replaced_by_ping", nats_url, plan.cluster_id)
    assert result == {"lost": ["client has been replaced or is no longer registered"]}


@pytest.mark.timeout(120)
async def test_file_store_restart_durable_resumes(stan_python: Path, tmp_path: Path) -> None:
    cluster_id = new_cluster_id()
    args = ["-cid", cluster_id, "-st", "file", "--dir", str(tmp_path / "store")]
    results = []
    for phase in ("restart_before", "restart_after"):
        server = await asyncio.to_thread(start_server, args, tmp_path / f"{phase}.log")
        try:
            assert server.proc.poll() is None, f"server exited:\n{server.log()}"
            results.append(await run_scenario(stan_python, phase, server.url, cluster_id))
        finally:
            await asyncio.to_thread(server.stop)
    before, after = results
    assert before == {"received": [[i, False] for i in range(1, 6)]}
    assert after == {
        "resumed": [[4, "r4", True], [5, "r5", True], [6, "r6", False]],
        "new_seq_ack": "",
        "replay": [[i, f"r{i}"] for i in range(1, 7)],
        "ghost": ["g"],  # the recovered, gone client was replaced by the new connection
    }
