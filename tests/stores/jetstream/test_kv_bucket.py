"""KV buckets spoken by hand on real nats-servers: compare-and-set on revisions, missing
and deleted keys, buckets alike to nats-py's (nats-py, an independent client, reads ours
and we open its), and the failures: a wrong revision, no JetStream, no answer, a closed
connection."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import nats
import pytest

from stanpkg.stores.jetstream.connection import (
    ConnectionClosed,
    JetStreamError,
    connect,
    js_api,
)
from stanpkg.stores.jetstream.kv_bucket import KvBucket, WrongRevision, bucket_config, ensure_bucket
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.endpoint import NatsEndpoint

_buckets = itertools.count(1)


def new_bucket() -> str:
    return f"kv{next(_buckets)}_{time.monotonic_ns() % 10**6}"


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[tuple[NatsConnection, KvBucket]]:
    conn = await connect(NatsEndpoint(url), name="kv-test")
    try:
        yield conn, await KvBucket.ensure(conn, new_bucket(), replicas=1)
    finally:
        await conn.close()


async def test_create_get_update_delete(jetstream_url: str) -> None:
    async with opened(jetstream_url) as (_, kv):
        assert await kv.get("k") is None
        first = await kv.create("k", b"one")
        assert await kv.get("k") == (first, b"one")
        second = await kv.update("k", b"two", last=first)
        assert second > first and await kv.get("k") == (second, b"two")
        await kv.delete("k", last=second)
        assert await kv.get("k") is None
        # A deleted key is created again over its deletion marker.
        third = await kv.create("k", b"three")
        assert third > second and await kv.get("k") == (third, b"three")
        await kv.delete("k")  # without a revision: whatever it holds
        assert await kv.get("k") is None


async def test_a_wrong_revision_writes_nothing(jetstream_url: str) -> None:
    async with opened(jetstream_url) as (_, kv):
        revision = await kv.create("k", b"mine")
        with pytest.raises(WrongRevision) as caught:
            await kv.create("k", b"theirs")  # it has a value
        assert caught.value.err_code == 10071
        with pytest.raises(WrongRevision):
            await kv.update("k", b"theirs", last=revision + 5)
        with pytest.raises(WrongRevision):
            await kv.update("absent", b"x", last=revision)  # no revision at all
        with pytest.raises(WrongRevision):
            await kv.delete("k", last=revision + 5)
        assert await kv.get("k") == (revision, b"mine")
        assert await kv.get("absent") is None


async def test_bad_keys_are_refused_before_sending(jetstream_url: str) -> None:
    async with opened(jetstream_url) as (_, kv):
        for bad in ("", "a b", "a.", "orders.*", "x>"):
            with pytest.raises(ValueError, match="invalid KV key"):
                await kv.get(bad)
            with pytest.raises(ValueError, match="invalid KV key"):
                await kv.create(bad, b"v")


async def test_buckets_are_alike_to_nats_pys(jetstream_url: str) -> None:
    """Ours is a bucket to nats-py (and nats-py's create of it is accepted: the same
    configuration); nats-py's is one to us, opened as it is."""
    ours, theirs = new_bucket(), new_bucket()
    conn = await connect(NatsEndpoint(jetstream_url), name="kv-test")
    nc = await nats.connect(jetstream_url)
    try:
        kv = await KvBucket.ensure(conn, ours, replicas=1)
        revision = await kv.create("k", b"ours")
        js = nc.jetstream()
        their_view = await js.key_value(ours)
        entry = await their_view.get("k")
        assert (entry.revision, entry.value) == (revision, b"ours")
        await js.create_key_value(bucket=ours, history=1, replicas=1, direct=True)
        await their_view.put("k", b"from nats-py")
        assert await kv.get("k") == (revision + 1, b"from nats-py")

        made = await js.create_key_value(bucket=theirs, history=1, replicas=1, direct=True)
        await made.put("k", b"theirs")
        again = await js_api(conn, f"STREAM.CREATE.KV_{theirs}", bucket_config(theirs, 1))
        assert "error" not in again, again  # the same configuration as nats-py's
        opened_theirs = await KvBucket.ensure(conn, theirs, replicas=1)
        found = await opened_theirs.get("k")
        assert found is not None and found[1] == b"theirs"
    finally:
        await nc.close()
        await conn.close()


async def test_an_existing_bucket_is_opened_as_it_is(jetstream_url: str) -> None:
    bucket = new_bucket()
    conn = await connect(NatsEndpoint(jetstream_url), name="kv-test")
    nc = await nats.connect(jetstream_url)
    try:
        await nc.jetstream().create_key_value(bucket=bucket, history=5, replicas=1, direct=True)
        kv = await KvBucket.ensure(conn, bucket, replicas=3)  # not what it has: no matter
        await kv.create("k", b"v")
        info = await js_api(conn, f"STREAM.INFO.KV_{bucket}", None)
        assert info["config"]["max_msgs_per_subject"] == 5
        assert info["config"]["num_replicas"] == 1
    finally:
        await nc.close()
        await conn.close()


async def test_a_stream_that_is_no_bucket_is_refused(jetstream_url: str) -> None:
    bucket = new_bucket()
    conn = await connect(NatsEndpoint(jetstream_url), name="kv-test")
    try:
        config = {"name": f"KV_{bucket}", "subjects": [f"$KV.{bucket}.>"]}
        assert "error" not in await js_api(conn, f"STREAM.CREATE.KV_{bucket}", config)
        with pytest.raises(JetStreamError, match="is no KV bucket"):
            await ensure_bucket(conn, bucket, replicas=1)
    finally:
        await conn.close()


async def test_a_missing_bucket_is_no_answer(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="kv-test")
    try:
        kv = KvBucket(conn, new_bucket())  # never created
        with pytest.raises(JetStreamError) as caught:
            await kv.get("k")
        assert caught.value.status == 503 and "no stream answers it" in str(caught.value)
        with pytest.raises(JetStreamError, match="no stream for the subject") as refused:
            await kv.create("k", b"v")
        assert not isinstance(refused.value, WrongRevision)
    finally:
        await conn.close()


async def test_without_jetstream_every_operation_fails(nats_url: str) -> None:
    conn = await NatsConnection.open(NatsEndpoint(nats_url), name="kv-test")
    try:
        with pytest.raises(JetStreamError) as caught:
            await ensure_bucket(conn, new_bucket(), replicas=1)
        assert caught.value.status == 503
        kv = KvBucket(conn, new_bucket())
        with pytest.raises(JetStreamError):
            await kv.get("k")
        with pytest.raises(JetStreamError):
            await kv.update("k", b"v", last=1)
    finally:
        await conn.close()


async def test_an_unanswered_read_times_out(jetstream_url: str) -> None:
    conn = await connect(NatsEndpoint(jetstream_url), name="kv-test")
    try:
        bucket = new_bucket()
        # A subscriber that never answers: as a replica that died with the request.
        conn.subscribe(f"$JS.API.DIRECT.GET.KV_{bucket}", lambda subject, reply, payload: None)
        await conn.flush()
        with pytest.raises(JetStreamError, match=r"no answer from \S+ within 0\.2 s"):
            await KvBucket(conn, bucket).get("k", timeout=0.2)
    finally:
        await conn.close()


async def test_a_closed_connection_fails_at_once(jetstream_url: str) -> None:
    async with opened(jetstream_url) as (conn, kv):
        revision = await kv.create("k", b"v")
        await conn.close()
        started = time.monotonic()
        with pytest.raises(ConnectionClosed, match="is closed"):
            await kv.get("k")
        with pytest.raises(ConnectionClosed):
            await kv.update("k", b"w", last=revision)
        with pytest.raises(ConnectionClosed):
            await kv.delete("k", last=revision)
        with pytest.raises(JetStreamError, match="did not answer"):
            await ensure_bucket(conn, kv.bucket, replicas=1)
        assert time.monotonic() - started < 1
