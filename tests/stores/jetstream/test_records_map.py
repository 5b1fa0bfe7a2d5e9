"""ReplicatedMap and its keys on real nats-servers: round trips, pipelined batches, a
closed connection, and an R3 bucket read from another server of the cluster."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.connection import connect, js_api, wait_ready
from stanpkg.stores.jetstream.layout import kv_key, kv_key_parts
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.transport.endpoint import NatsEndpoint
from tests.stores.jetstream.conftest import NatsProc, lead_elsewhere, metadata_leader

_buckets = itertools.count(1)

HOSTILE = [
    "",
    "foo",
    "foo.bar",
    "orders.*",
    "orders.>",
    "a b\tc\n",
    "=",
    "=abc",
    "-dash",
    "_under",
    "ünïcödé 名前",
    "$KV.x.y",
    "/slashes/",
    "..",
    "x" * 300,
    "emoji 🎉",
]


def new_bucket() -> str:
    return f"map{next(_buckets)}_{time.monotonic_ns() % 10**6}"


@asynccontextmanager
async def opened(url: str, bucket: str, replicas: int = 1) -> AsyncIterator[ReplicatedMap]:
    conn = await connect(NatsEndpoint(url), name="records-map-test")
    try:
        await wait_ready(conn, 20)
        yield await ReplicatedMap.open(conn, bucket, replicas=replicas)
    finally:
        await conn.close()


@pytest.mark.parametrize("name", HOSTILE)
def test_kv_key_round_trips_any_name(name: str) -> None:
    key = kv_key("sub", name, "7")
    assert kv_key_parts(key) == ("sub", name, "7")
    assert all(token for token in key.split("."))
    assert set(key) <= set("-/_=.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def test_kv_keys_of_different_parts_differ() -> None:
    keys = {kv_key("c", a, b) for a in HOSTILE for b in HOSTILE}
    assert len(keys) == len(HOSTILE) ** 2
    assert kv_key("client", "abc-1") == "client.abc-1"  # plain names stay readable


def test_bad_keys_are_refused_before_writing() -> None:
    replicated = ReplicatedMap.__new__(ReplicatedMap)
    replicated._queued = {}
    for bad in ["", "a b", "a.", ".a", "a..b", "orders.*", "x>"]:
        with pytest.raises(ValueError, match="invalid KV key"):
            replicated.put(bad, b"v")
    assert replicated._queued == {}
    with pytest.raises(ValueError):
        kv_key()


async def test_put_delete_flush_load(jetstream_url: str) -> None:
    bucket = new_bucket()
    async with opened(jetstream_url, bucket) as replicated:
        assert await replicated.load() == {}
        await replicated.flush()  # nothing queued
        replicated.put("a", b"1")
        replicated.put("b", b"2")
        replicated.put("a", b"3")  # the last write of a key wins
        replicated.put("c", b"")
        replicated.put("gone", b"x")
        replicated.delete("gone")
        await replicated.flush()
        assert replicated.queued == 0
        replicated.delete("b")
        replicated.put(kv_key("ch", "orders.>"), b"wild")
        await replicated.flush()
    async with opened(jetstream_url, bucket) as reopened:
        assert await reopened.load() == {"a": b"3", "c": b"", kv_key("ch", "orders.>"): b"wild"}


async def test_ten_thousand_records_pipelined(jetstream_url: str) -> None:
    bucket = new_bucket()
    records = {kv_key("sub", f"channel.{i}", str(i)): f"record {i}".encode() for i in range(10_000)}
    async with opened(jetstream_url, bucket) as replicated:
        for key, value in records.items():
            replicated.put(key, value)
        started = time.perf_counter()
        await replicated.flush()
        flushed = time.perf_counter() - started
    async with opened(jetstream_url, bucket) as reopened:
        started = time.perf_counter()
        loaded = await reopened.load()
        load_time = time.perf_counter() - started
    assert loaded == records
    print(f"\n10k puts flushed in {flushed:.2f} s, loaded in {load_time:.2f} s")


async def test_closed_connection_fails_the_flush_and_keeps_the_writes(
    jetstream_url: str,
) -> None:
    async with opened(jetstream_url, new_bucket()) as replicated:
        replicated.put("a", b"1")
        replicated.delete("b")
        await replicated._conn.close()
        started = time.monotonic()
        with pytest.raises(StoreError) as caught:
            await replicated.flush()
        assert time.monotonic() - started < 2  # no retries on a closed connection
        assert "unable to replicate 2 record(s)" in str(caught.value)
        assert f"the connection to JetStream at {jetstream_url} is closed" in str(caught.value)
        assert replicated.queued == 2  # kept for a later flush
        with pytest.raises(StoreError, match="unable to read the cluster state"):
            await replicated.load()


async def test_open_on_a_closed_connection_is_a_store_error(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="records-map-test")
    await conn.close()
    with pytest.raises(StoreError, match="unable to open the cluster state"):
        await ReplicatedMap.open(conn, new_bucket(), replicas=1)


async def load_when_current(replicated: ReplicatedMap, timeout: float = 20) -> dict[str, bytes]:
    """A replica read right after a write may be behind: load refuses it (StoreError)
    and the caller retries, as the clustered store does at promotion."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            return await replicated.load()
        except StoreError:
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0.2)


@pytest.mark.slow
async def test_r3_writes_seen_through_another_server(jetstream_cluster: list[NatsProc]) -> None:
    bucket = new_bucket()
    (_, first), (_, second), (_, third) = jetstream_cluster
    async with opened(first, bucket, replicas=3) as writer:
        for i in range(100):
            writer.put(kv_key("client", f"c{i}"), str(i).encode())
        writer.delete(kv_key("client", "c0"))
        await writer.flush()
        async with opened(second, bucket, replicas=3) as reader:
            loaded = await load_when_current(reader)
        assert len(loaded) == 99 and loaded[kv_key("client", "c99")] == b"99"
        info = await js_api(writer._conn, f"STREAM.INFO.KV_{bucket}", None)
        assert info["config"]["num_replicas"] == 3
    async with opened(third, bucket, replicas=3) as other:
        assert await load_when_current(other) == loaded


@pytest.mark.slow
async def test_a_load_needs_no_metadata_leader(
    monitored_cluster: tuple[list[NatsProc], list[int]],
) -> None:
    """The records are read while JetStream elects a new metadata leader (4-9 s after the
    old one died): a consumer could not be created then, direct gets are answered."""
    servers, http_ports = monitored_cluster
    names = [f"js{index + 1}" for index in range(3)]
    meta = metadata_leader(http_ports[0])
    survivor = servers[(names.index(meta) + 1) % 3][1]
    bucket = new_bucket()
    async with opened(survivor, bucket, replicas=3) as writer:
        for i in range(300):
            writer.put(kv_key("client", f"c{i}"), str(i).encode())
        writer.delete(kv_key("client", "c0"))
        await writer.flush()
        await lead_elsewhere(survivor, f"KV_{bucket}", avoid=meta)
        await load_when_current(writer)  # every replica has the writes
        servers[names.index(meta)][0].kill()
        started = time.monotonic()
        loaded = await asyncio.wait_for(writer.load(leader_timeout=2), 3.5)
        assert time.monotonic() - started < 3.5  # JetStream's election takes 4 s at least
    assert len(loaded) == 299 and loaded[kv_key("client", "c299")] == b"299"
