"""A clustered plan's embedded nats-server runs JetStream; a non-clustered one's does not.

Real nats-server processes built from compiled plans (``node.embedded_config``), driven with
nats-py's JetStream API.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client as NatsClient

from stanpkg.node import embedded_config, lock_cluster_log_path
from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.server.errors import StartupError
from stanpkg.transport import EmbeddedNatsServer
from stanpkg.transport.embedded import check_config
from stanpkg.transport.natsconf import render_config
from tests.transport.conftest import free_port

T = TypeVar("T")
NODES = ("a", "b", "c")
READY_WITHIN = 20.0  # JetStream's meta leader election on a loaded 2-core machine


def make_plan(*args: str, cluster_id: str = "js-test") -> Plan:
    compiled = compile_args(["-cid", cluster_id, "-a", "127.0.0.1", "-p", "-1", *args], env={})
    assert compiled.plan is not None, (compiled.usage_error, compiled.diagnostics)
    return compiled.plan


def node_plans_from_flags(tmp_path: Path, *extra: str) -> list[Plan]:
    """The Go start-up of issue 12, one plan per node: -cluster, -routes, -cluster_peers."""
    ports = {node: free_port() for node in NODES}
    plans = []
    for node in NODES:
        others = [n for n in NODES if n != node]
        routes = ",".join(f"nats://127.0.0.1:{ports[n]}" for n in others)
        plans.append(
            make_plan(
                "-clustered",
                "-cluster_node_id",
                node,
                "-cluster_peers",
                ",".join(others),
                "-cluster",
                f"nats://127.0.0.1:{ports[node]}",
                "-routes",
                routes,
                "-st",
                "file",
                "-dir",
                str(tmp_path / node / "store"),
                "-cluster_log_path",
                str(tmp_path / node / "raft"),
                *extra,
            )
        )
    return plans


def node_plans_from_nats_conf(tmp_path: Path, cluster_name: str = "") -> list[Plan]:
    """The same cluster through configuration files: NATS routes in the top-level
    ``cluster {}`` (passed through to nats-server), the node in ``streaming { cluster {} }``."""
    ports = {node: free_port() for node in NODES}
    named = f"  name: {cluster_name}\n" if cluster_name else ""
    plans = []
    for node in NODES:
        routes = ", ".join(f'"nats://127.0.0.1:{ports[n]}"' for n in NODES if n != node)
        peers = ", ".join(f'"{n}"' for n in NODES if n != node)
        conf = tmp_path / f"{node}.conf"
        conf.write_text(
            f'cluster {{\n{named}  listen: "127.0.0.1:{ports[node]}"\n  routes: [{routes}]\n}}\n'
            f'streaming {{\n  store: file\n  dir: "{tmp_path / node / "store"}"\n'
            f'  cluster {{\n    node_id: "{node}"\n    peers: [{peers}]\n'
            f'    log_path: "{tmp_path / node / "raft"}"\n  }}\n}}\n'
        )
        plans.append(make_plan("-c", str(conf)))
    return plans


@contextlib.asynccontextmanager
async def embedded(plans: list[Plan]) -> AsyncIterator[list[EmbeddedNatsServer]]:
    servers = [
        EmbeddedNatsServer(
            embedded_config(plan), on_log=lambda _line: None, on_exit=lambda _c: None
        )
        for plan in plans
    ]
    try:
        await asyncio.gather(*(server.start(timeout=15.0) for server in servers))
        yield servers
    finally:
        await asyncio.gather(*(server.stop() for server in servers))


@contextlib.asynccontextmanager
async def connected(server: EmbeddedNatsServer) -> AsyncIterator[NatsClient]:
    nc = await nats.connect(server.client_url, allow_reconnect=False)
    try:
        yield nc
    finally:
        await nc.close()


NO_SUITABLE_PEERS = 10005  # JetStream's err_code while the peers of a placement are missing


async def until_ready(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()`` retried while JetStream elects its leaders, and while the meta
    leader does not yet count every peer (a loaded host: "no suitable peers")."""
    deadline = asyncio.get_running_loop().time() + READY_WITHIN
    while True:
        try:
            return await attempt()
        except (
            nats.js.errors.ServiceUnavailableError,
            nats.errors.TimeoutError,
            nats.js.errors.BadRequestError,
        ) as exc:
            joining = not isinstance(exc, nats.js.errors.BadRequestError) or (
                exc.err_code == NO_SUITABLE_PEERS
            )
            if not joining or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.25)


async def assert_replicated_through_every_node(servers: list[EmbeddedNatsServer]) -> None:
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(connected(s)) for s in servers]
        first = clients[0].jetstream(timeout=5.0)
        info = await until_ready(
            lambda: first.add_stream(name="R3", subjects=["r3.>"], num_replicas=3)
        )
        assert info.config.num_replicas == 3
        for index, nc in enumerate(clients):
            ack = await until_ready(functools.partial(nc.jetstream(timeout=5.0).publish, "r3.x"))
            assert ack.stream == "R3" and ack.seq == index + 1
        state = await clients[-1].jetstream(timeout=5.0).stream_info("R3")
        assert state.state.messages == len(servers)
        assert state.cluster is not None and state.cluster.leader in NODES
        replicas = {peer.name for peer in state.cluster.replicas or ()}
        assert replicas | {state.cluster.leader} == set(NODES)


# -- three nodes ---------------------------------------------------------------------------
@pytest.mark.slow
async def test_three_nodes_started_with_the_go_flags_form_a_jetstream_cluster(
    tmp_path: Path,
) -> None:
    plans = node_plans_from_flags(tmp_path, "-cluster_sync")
    async with embedded(plans) as servers:
        for node, server in zip(NODES, servers, strict=True):
            text = server.config_text
            assert f'server_name: "{node}"' in text
            assert f'store_dir: "{tmp_path / node / "raft"}"' in text
            assert "sync_interval: always" in text
            assert 'name: "stan-js-test"' in text
        await assert_replicated_through_every_node(servers)
    for node in NODES:
        assert (tmp_path / node / "raft" / "jetstream").is_dir()


@pytest.mark.slow
async def test_routes_from_the_nats_config_file_get_the_cluster_name(tmp_path: Path) -> None:
    plans = node_plans_from_nats_conf(tmp_path)
    async with embedded(plans) as servers:
        for server in servers:
            assert 'name: "stan-js-test"' in server.config_text
        await assert_replicated_through_every_node(servers)


def test_the_operators_nats_cluster_name_wins(tmp_path: Path) -> None:
    for plan in node_plans_from_nats_conf(tmp_path, cluster_name="mine"):
        config = embedded_config(plan)
        assert "stan-" not in config.passthrough and "mine" in config.passthrough
    for plan in node_plans_from_flags(tmp_path / "flags", "-cluster_name", "ours"):
        assert embedded_config(plan).cluster_name == "ours"


def test_the_derived_cluster_name_is_a_valid_nats_cluster_name(tmp_path: Path) -> None:
    plan = make_plan(
        *("-clustered", "-cluster_node_id", "a", "-st", "file", "-dir", str(tmp_path / "d")),
        *("-cluster", "nats://127.0.0.1:7001", "-routes", "nats://127.0.0.1:7002"),
        cluster_id="orders.eu-west_1",
    )
    config = embedded_config(plan)
    assert config.cluster_name == "stan-orders_eu-west_1"
    assert check_config(render_config(config)) == []


# -- one node, and none ----------------------------------------------------------------------
async def test_a_bootstrap_node_has_jetstream_r1_in_its_log_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the log path is relative to the working directory, as in Go
    plan = make_plan(
        "-clustered",
        "-cluster_bootstrap",
        "-cluster_node_id",
        "solo",
        "-st",
        "file",
        "-dir",
        "store",
        "-cluster_log_path",
        "logs/solo",
    )
    async with embedded([plan]) as (server,), connected(server) as nc:
        assert "cluster {" not in server.config_text  # no routes: no NATS cluster
        assert "sync_interval" not in server.config_text
        js = nc.jetstream(timeout=5.0)
        await until_ready(lambda: js.add_stream(name="R1", subjects=["r1"]))
        assert (await js.publish("r1", b"x")).seq == 1
        assert nc._server_info.get("server_name") == "solo"
    assert (tmp_path / "logs" / "solo" / "jetstream").is_dir()


async def test_without_a_log_path_jetstream_uses_cluster_id_slash_node_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    plan = make_plan(
        "-clustered", "-cluster_bootstrap", "-cluster_node_id", "n1", "-st", "file", "-dir", "s"
    )
    assert embedded_config(plan).jetstream_dir == "js-test/n1"
    async with embedded([plan]) as (server,), connected(server) as nc:
        await until_ready(nc.jetstream(timeout=5.0).account_info)
    assert (tmp_path / "js-test" / "n1" / "jetstream").is_dir()


@pytest.mark.slow
async def test_channel_byte_limits_reserve_no_storage(tmp_path: Path) -> None:
    """Each channel's max_bytes (976.56 MB by default) is a stream limit that clustered
    JetStream counts against its storage when it places a stream; left at its default
    (75 % of the free disk), a cluster refused new channels after a few dozen ("no
    suitable peers for placement, insufficient storage")."""
    plans = node_plans_from_flags(tmp_path)
    limit = plans[0].store_limits.defaults.max_bytes
    async with embedded(plans) as servers, connected(servers[0]) as nc:
        js = nc.jetstream(timeout=10.0)
        await until_ready(js.account_info)
        for n in range(150):  # 150 x 3 x 1 GB: far beyond this machine's disk
            await until_ready(
                functools.partial(
                    js.add_stream,
                    name=f"C{n}",
                    subjects=[f"c.{n}"],
                    max_bytes=limit,
                    num_replicas=3,
                )
            )


async def test_a_non_clustered_plan_has_no_jetstream(tmp_path: Path) -> None:
    port = free_port()
    plan = make_plan(
        "-st",
        "file",
        "-dir",
        str(tmp_path / "store"),
        "-cluster",
        f"nats://127.0.0.1:{port}",
        "-routes",
        f"nats://127.0.0.1:{port + 1}",
    )
    config = embedded_config(plan)
    assert (config.server_name, config.jetstream_dir, config.cluster_name) == ("", "", "")
    assert config.jetstream_sync_always is False
    async with embedded([plan]) as (server,), connected(server) as nc:
        for absent in ("jetstream", "server_name", "name:"):
            assert absent not in server.config_text
        with pytest.raises((nats.js.errors.ServiceUnavailableError, nats.errors.NoRespondersError)):
            await nc.jetstream(timeout=2.0).account_info()


# -- bad input ---------------------------------------------------------------------------------
def test_two_nodes_given_one_log_path_are_refused(tmp_path: Path) -> None:
    # nats-server v2.15 itself starts a second server on a store_dir in use (both then
    # write the same files), so the node refuses it before starting its nats-server.
    shared = str(tmp_path / "shared")
    plans = [
        make_plan(
            "-clustered",
            "-cluster_bootstrap",
            "-cluster_node_id",
            node,
            "-st",
            "file",
            "-dir",
            str(tmp_path / node),
            "-cluster_log_path",
            shared,
        )
        for node in ("a", "b")
    ]
    held = lock_cluster_log_path(plans[0])
    assert held is not None
    try:
        with pytest.raises(
            StartupError, match=f'cluster log path "{shared}" is in use by another node'
        ):
            lock_cluster_log_path(plans[1])
    finally:
        held.close()  # type: ignore[attr-defined]
    released = lock_cluster_log_path(plans[1])
    assert released is not None
    released.close()  # type: ignore[attr-defined]


def test_the_embedded_servers_memory_limit_comes_from_the_plan(tmp_path: Path) -> None:
    assert embedded_config(make_plan()).memory_limit == 256 * 1024 * 1024  # the default
    assert embedded_config(make_plan("--nats_memory_limit", "1GB")).memory_limit == 1 << 30
    conf = tmp_path / "stan.conf"
    conf.write_text('nats_memory_limit: 0\nstreaming { cluster_id: "c" }\n')
    assert embedded_config(make_plan("-sc", str(conf))).memory_limit == 0
