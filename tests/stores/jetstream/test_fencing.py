"""A serving node whose process stalled (SIGSTOP, a VM pause) past its lease time may run
a few callbacks before its lease renewer notices. The channels' writes are fenced by
JetStream (each expects its channel's last message); the records' are not, so the node
checks its own lease before each round of them. On a real JetStream server, with the
whole process stalled by a blocking sleep."""

from __future__ import annotations

import asyncio
import time

import pytest

from stanpkg.stores.base import ClientRecord, StoreError
from stanpkg.stores.jetstream.layout import kv_key
from stanpkg.stores.jetstream.replicated_messages import ReplicatedMessages
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, new_cluster_id
from tests.stores.jetstream.test_promotion import _batch
from tests.stores.jetstream.test_standby_view import _leader, _publish, _store


async def test_a_node_stalled_past_its_lease_writes_no_records(jetstream_url: str) -> None:
    cluster_id = new_cluster_id()
    node = await _leader(jetstream_url, cluster_id)  # lease time 2 s
    try:
        node.add_client(ClientRecord("before", "_INBOX.before"))
        await node.records_durable()
        await _publish(node, "orders", 1)
        msgs = node.create_channel("orders").msgs
        assert isinstance(msgs, ReplicatedMessages)
        assert node._contention is not None
        lease = node._contention.lease
        # The whole process stalls for a lease time: the lease's thread (a little longer,
        # so that the main loop runs first when it ends) and the main loop.
        lease._thread.call_soon(time.sleep, lease.ttl + 0.5)
        time.sleep(lease.ttl)
        # Its first callbacks, before the renewer runs: a connect and a publish.
        node.add_client(ClientRecord("stalled", "_INBOX.stalled"))
        msgs.store(_batch(2))
        write = msgs.begin_flush()
        with pytest.raises(StoreError):  # not current, or not leading once the renewer ran
            await node.records_durable()
        with pytest.raises(StoreError, match="lease"):
            await write
        last = await msgs.channel_log.last_message()
        assert last is not None and last.sequence == 1
    finally:
        node.close()
        await asyncio.sleep(0.2)
    reader = _store(cluster_id, "b", LogCapture())
    await reader.connect(NatsEndpoint(jetstream_url))
    try:
        state = await reader._open_records(reader._require_link().conn)
        records = await state.load()
    finally:
        reader.close()
        await asyncio.sleep(0.2)
    assert kv_key("client", "before") in records
    assert kv_key("client", "stalled") not in records
