"""The real third-party client, node-nats-streaming 0.3.2 from npm, against the server.

Each test runs one scenario of tests/js/scenario.js (JSON over stdout) while the server
runs in this event loop.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.server.conftest import JS_DIR, make_plan, running


async def run_scenario(name: str, url: str, cluster_id: str, **args: Any) -> Any:
    payload = json.dumps({"url": url, "cluster": cluster_id, **args})
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(JS_DIR / "scenario.js"),
        name,
        payload,
        cwd=JS_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    lines = out.decode().strip().splitlines()
    assert lines, f"no output from scenario {name}: {err.decode()}"
    report = json.loads(lines[-1])
    assert report["ok"], f"scenario {name} failed: {report['error']}\n{err.decode()}"
    return report["result"]


async def test_start_positions(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("startPositions", nats_url, plan.cluster_id)
    assert result == {
        "all": [1, 2, 3, 4, 5],
        "last": [5],
        "seq3": [3, 4, 5],
        "delta": [1, 2, 3, 4, 5],
        "newOnly": [],
    }


async def test_publish_subscribe(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url) as (server, _):
        result = await run_scenario("pubsub", nats_url, plan.cluster_id, count=500)
        assert server.handlers.publisher.in_msgs == 500
    assert result["guids"] == 500
    assert result["seqs"] == list(range(1, 501))
    assert sorted(result["data"]) == sorted(f"n{i}" for i in range(500))


async def test_manual_ack_and_redelivery(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("redelivery", nats_url, plan.cluster_id)
    assert result["first"] == {"seq": 1, "data": "once", "redelivered": False, "count": 0}
    assert result["second"] == {"seq": 1, "data": "once", "redelivered": True, "count": 1}
    assert result["total"] == 2  # acked on the redelivery: no third delivery


async def test_max_inflight(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("maxInflight", nats_url, plan.cluster_id)
    assert result == {"before": 2, "after": 3}


async def test_durable_resume_and_unsubscribe(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("durable", nats_url, plan.cluster_id)
    resumed = [(m["seq"], m["redelivered"]) for m in result["resumed"]]
    assert resumed == [(3, True), (4, True), (5, False)]
    assert result["afterUnsub"] == 0


async def test_durable_across_connections(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("durableAcrossConnections", nats_url, plan.cluster_id)
    assert result == {"got": ["b"], "total": 1}


async def test_queue_group(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("queue", nats_url, plan.cluster_id)
    shared = result["shared"]
    assert shared["a"] + shared["b"] == 20 and shared["a"] > 0 and shared["b"] > 0
    assert result["held"], "the manual-ack member got nothing"
    assert sorted(result["moved"]) == sorted(result["held"])


async def test_server_errors_reach_the_client(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("errors", nats_url, plan.cluster_id)
    assert result == {
        "duplicate": "stan: clientID already registered",
        "dupDurable": "stan: duplicate durable registration",
        "durableQueueName": (
            "stan: durable name of a durable queue subscriber can't contain the character ':'"
        ),
        "publish": (
            'rejecting channel "Casing" because channel "casing" alreay exists '
            "(different cases not allowed)"
        ),
    }


async def test_client_pings(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("pings", nats_url, plan.cluster_id)
    assert result == {"lost": None}


async def test_replaced_client_learns_it_from_pings(nats_url: str, node_modules: Path) -> None:
    plan = make_plan()
    async with running(plan, nats_url):
        result = await run_scenario("replacedByPing", nats_url, plan.cluster_id)
    assert result["lost"] == "client has been replaced or is no longer registered"
