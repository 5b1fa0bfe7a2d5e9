"""Servers sharing a cluster ID: the standalone probe and partitioning (channel-list
exchange, conflicts, serving only configured channels)."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import subprocess
from pathlib import Path

import nats
import pytest

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb
from stanpkg.server.errors import StartupError
from stanpkg.server.log import Logger
from stanpkg.server.modes import mode_for
from stanpkg.server.partitioning import decode_channel_list, encode_channel_lists
from stanpkg.server.server import StreamingServer
from stanpkg.stores.memory import MemoryStore
from stanpkg.transport.embedded import find_nats_server_binary
from stanpkg.transport.endpoint import NatsEndpoint
from tests.ports import wait_until_accepting
from tests.server.conftest import LogCapture, make_plan, new_cluster_id, running
from tests.server.stan_client import StanClient, nats_flush
from tests.transport.conftest import free_port


def _partition_plan(tmp: Path, cluster_id: str, channels: list[str], name: str) -> object:
    conf = tmp / f"{name}.conf"
    entries = ", ".join(f'"{c}": {{}}' for c in channels)
    conf.write_text(f"partitioning: true\nstore_limits: {{ channels: {{ {entries} }} }}\n")
    return make_plan("-sc", str(conf), cluster_id=cluster_id)


async def test_second_standalone_server_with_same_cluster_id_fails(nats_url: str) -> None:
    cid = new_cluster_id()
    plan = make_plan(cluster_id=cid)
    async with running(plan, nats_url) as (first, _):
        with pytest.raises(StartupError) as info:
            async with running(make_plan(cluster_id=cid), nats_url):
                pass
        assert str(info.value) == f'discovered another streaming server with cluster ID "{cid}"'
        # The probe's pseudo-client was closed again on the first server.
        await asyncio.sleep(0.1)
        assert first.clients.get(cid) is None


def test_channel_list_encoding_round_trip() -> None:
    names = ["foo", "bar.>", "ünï.*"]
    (payload,) = encode_channel_lists(names, "SERVERID", 1024 * 1024)
    msg = spb.CtrlMsg.FromString(payload)
    assert msg.MsgType == spb.CtrlMsg.Partitioning and msg.ServerID == "SERVERID"
    assert msg.Data[:2] == b"\x03\x00"  # 2-byte little-endian length
    assert list(decode_channel_list(msg.Data)) == names
    many = [f"channel.{i:04d}" for i in range(100)]
    chunks = encode_channel_lists(many, "ID", 200)
    assert len(chunks) > 1 and all(len(c) <= 200 for c in chunks)
    decoded = [n for c in chunks for n in decode_channel_list(spb.CtrlMsg.FromString(c).Data)]
    assert decoded == many
    with pytest.raises(StartupError, match="message payload too small"):
        encode_channel_lists(["x" * 300], "ID", 200)


async def test_partitioning_conflict_is_reported(nats_url: str, tmp_path: Path) -> None:
    cid = new_cluster_id()
    plan_a = _partition_plan(tmp_path, cid, ["foo", "bar.>"], "a")
    async with running(plan_a, nats_url) as (a, _):  # type: ignore[arg-type]
        plan_c = _partition_plan(tmp_path, cid, ["bar.x"], "c")
        with pytest.raises(StartupError) as info:
            async with running(plan_c, nats_url):  # type: ignore[arg-type]
                pass
        assert str(info.value) == (
            f'channel "bar.x" causes conflict with channels on server "{a.server_id}"'
        )
        # A wildcard on the newcomer's side overlapping a literal of ours also conflicts.
        plan_d = _partition_plan(tmp_path, cid, ["*"], "d")
        with pytest.raises(StartupError, match='channel "foo" causes conflict'):
            async with running(plan_d, nats_url):  # type: ignore[arg-type]
                pass


async def test_partitioned_servers_share_the_work(nats_url: str, tmp_path: Path) -> None:
    cid = new_cluster_id()
    plan_a = _partition_plan(tmp_path, cid, ["foo"], "a")
    plan_b = _partition_plan(tmp_path, cid, ["bar.*"], "b")
    async with running(plan_a, nats_url) as (a, _), running(plan_b, nats_url) as (b, _):  # type: ignore[arg-type]
        client = await StanClient.connect(nats_url, cid, "c")
        await asyncio.sleep(0.05)
        sub_foo = await client.subscribe("foo", start=pb.First)
        sub_bar = await client.subscribe("bar.baz", start=pb.First)
        await client.publish("foo", b"for a")
        await client.publish("bar.baz", b"for b")
        assert (await sub_foo.next()).data == b"for a"
        assert (await sub_bar.next()).data == b"for b"
        assert (
            a.handlers.channels.get("foo") is not None
            and a.handlers.channels.get("bar.baz") is None
        )
        assert (
            b.handlers.channels.get("bar.baz") is not None
            and b.handlers.channels.get("foo") is None
        )
        # Channels nobody serves: no reply at all.
        req = pb.SubscriptionRequest(
            clientID="c", subject="other", inbox="i", maxInFlight=1, ackWaitInSecs=1
        )
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await client.nc.request(client.resp.subRequests, req.SerializeToString(), timeout=0.5)
        await client.close()


async def test_partitioning_requires_channels(nats_url: str) -> None:
    # The plan compiler refuses this too; the server checks on its own.
    plan = dataclasses.replace(make_plan(), partitioning=True)
    with pytest.raises(StartupError, match="stan: no configured channel"):
        async with running(plan, nats_url):
            pass


async def test_partitioned_publish_waits_for_connect(nats_url: str, tmp_path: Path) -> None:
    """A publish may overtake its client's connect request; the server waits for it."""
    cid = new_cluster_id()
    plan = _partition_plan(tmp_path, cid, ["foo"], "a")
    async with running(plan, nats_url) as (server, _):  # type: ignore[arg-type]
        nc = await nats.connect(nats_url)
        pm = pb.PubMsg(clientID="late", guid="g", subject="foo", data=b"x")
        reply = nc.new_inbox()
        sub = await nc.subscribe(reply)
        await nc.publish(f"_STAN.pub.{cid}.foo", pm.SerializeToString(), reply=reply)
        await nats_flush(nc)
        await asyncio.sleep(0.2)
        client = await StanClient.connect(nats_url, cid, "late", protocol=0, nc=nc)
        msg = await sub.next_msg(timeout=2)
        assert pb.PubAck.FromString(msg.data).error == ""
        assert server.handlers.channels.get("foo").msgs.last_sequence == 1  # type: ignore[union-attr]
        await client.close()


async def test_conflict_found_when_nats_servers_join_later(tmp_path: Path) -> None:
    """internal-protocol.md §4.3: new NATS servers in the cluster trigger a new exchange;
    a conflict found then is fatal (``Partitioning error: ...``)."""
    binary = find_nats_server_binary()
    ports = {name: free_port() for name in ("a", "b", "route_a", "route_b")}
    procs: list[subprocess.Popen[bytes]] = []

    def nats_conf(name: str, routes: str = "") -> Path:
        conf = tmp_path / f"nats-{name}.conf"
        conf.write_text(
            f"host: 127.0.0.1\nport: {ports[name]}\n"
            f"cluster {{ name: part, listen: 127.0.0.1:{ports['route_' + name]}\n{routes} }}\n"
        )
        return conf

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    for name in ("a", "b"):
        procs.append(subprocess.Popen([binary, "-c", str(nats_conf(name))], **quiet))  # type: ignore[call-overload]
    try:
        for name in ("a", "b"):
            await _wait_port(ports[name])
        cid = new_cluster_id()
        fatal: dict[str, str] = {}
        servers = []
        for name in ("a", "b"):
            plan = _partition_plan(tmp_path, cid, ["foo"], f"s{name}")
            log = Logger(stream=LogCapture(), debug=False, trace=False)
            store = MemoryStore(plan.store_limits, log)  # type: ignore[attr-defined]

            def on_fatal(reason: str, name: str = name) -> None:
                fatal.setdefault(name, reason)

            server = StreamingServer(plan, store, log, mode=mode_for(plan), on_fatal=on_fatal)  # type: ignore[arg-type]
            await server.start(NatsEndpoint(f"nats://127.0.0.1:{ports[name]}"))
            servers.append(server)
        assert fatal == {}  # the two NATS servers do not know each other yet
        nats_conf("a", routes=f"routes: [nats-route://127.0.0.1:{ports['route_b']}]")
        procs[0].send_signal(signal.SIGHUP)  # reload: the route forms
        for _ in range(100):
            if fatal:
                break
            await asyncio.sleep(0.1)
        assert fatal, "no conflict reported after the NATS servers joined"
        for reason in fatal.values():  # each side may see the other first
            assert reason.startswith('Partitioning error: channel "foo" causes conflict with ')
        for server in servers:
            await server.stop()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


async def _wait_port(port: int) -> None:
    assert await wait_until_accepting(port, every=0.02, within=4), f"nothing listens on {port}"
