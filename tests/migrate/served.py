"""What a node serving a migrated Go fixture must show: the manifest's channels and
subscriptions (monitoring), every message with its sequence (a STAN client from the
first), and each offline durable resuming with the pending messages the standalone store
had for it."""

from __future__ import annotations

import base64
import json
from typing import Any

from stanpkg.plan.compile import compile_args
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.file.format import open_datastore
from tests.cluster.conftest import Node
from tests.pipeline.helpers import FixtureCopy
from tests.server.stan_client import StanClient

__all__ = ["check_served"]


def _subs(subscriptions: list[dict[str, Any]]) -> list[list[tuple[str, str]]]:
    """Every field of /streaming/channelsz's subscriptions but whether one is stalled now."""
    return sorted(
        sorted((name, str(value)) for name, value in sub.items() if name != "is_stalled")
        for sub in subscriptions
    )


def _channel(node: Node, name: str) -> dict[str, Any]:
    status, body = node.http(f"/streaming/channelsz?channel={name}&subs=1")
    assert status == 200, body
    document: dict[str, Any] = json.loads(body)
    return document


def _pending(copy: FixtureCopy) -> dict[tuple[str, str], tuple[int, list[int]]]:
    """(channel, durable name) -> (max_inflight, pending sequences at or past the channel's
    first): what the standalone store would redeliver to each durable that resumes."""
    plan = compile_args(["-sc", str(copy.config)], {}).plan
    assert plan is not None
    key = plan.encryption_key.reveal().encode() if plan.encrypt else None
    ds = open_datastore(
        copy.datastore, encryption_key=key, limits=plan.store_limits, on_bad_record=lambda _: None
    )
    found = {}
    for name, channel in ds.channels.items():
        for sub in channel.subscriptions.values():
            record = sub.record
            if record.is_durable and not record.qgroup:
                live = [seq for seq in sub.pending if seq >= channel.first_seq]
                found[(name, record.durable_name)] = (record.max_inflight, live)
    return found


async def check_served(leader: Node, copy: FixtureCopy, url: str = "") -> None:
    """``leader`` serves ``copy`` as the Go server served it after its restart; clients
    connect to ``url`` (the leader's own NATS by default)."""
    url = url or leader.url
    manifest = copy.manifest
    name = copy.name
    for want in manifest["expected"]["channels"]:
        got = _channel(leader, want["name"])
        assert (got["first_seq"], got["last_seq"], got["msgs"]) == (
            want["first_seq"],
            want["last_seq"],
            want["msgs"],
        ), want["name"]
        assert _subs(got.get("subscriptions", [])) == _subs(want["subscriptions"]), want["name"]

    cid = manifest["cluster_id"]
    client = await StanClient.connect(url, cid, "migrate-check")
    for channel, messages in manifest["expected"]["messages"].items():
        if not messages:
            continue
        sub = await client.subscribe(channel, start=pb.First)
        got_messages = await sub.collect(len(messages), timeout=10)
        await sub.assert_nothing(0.3)
        assert [
            (m.sequence, m.subject, m.reply, base64.b64encode(m.data).decode(), str(m.timestamp))
            for m in got_messages
        ] == [
            (m["sequence"], m["subject"], m["reply"], m["data_b64"], m["timestamp_ns"])
            for m in messages
        ], channel
    await client.close()

    # Each durable comes back with the same pending messages, redelivered.
    owners = {
        (channel["name"], sub["durable_name"]): sub["client_id"]
        for channel in manifest["expected"]["channels"]
        for sub in channel["subscriptions"]
        if sub.get("durable_name") and sub["is_offline"]
    }
    last_seqs = {c["name"]: c["last_seq"] for c in manifest["expected"]["channels"]}
    last_sent = {
        (channel["name"], sub["durable_name"]): sub["last_sent"]
        for channel in manifest["expected"]["channels"]
        for sub in channel["subscriptions"]
        if sub.get("durable_name")
    }
    resumed = []
    for (channel, durable), (inflight, pending) in _pending(copy).items():
        if (channel, durable) not in owners:
            continue  # its client is still connected (recovered): not ours to take over
        resumed.append((channel, durable, pending))
        owner = await StanClient.connect(url, cid, owners[(channel, durable)])
        sub = await owner.subscribe(
            channel, durable=durable, manual_acks=True, max_inflight=inflight
        )
        redelivered = await sub.collect(len(pending), timeout=10)
        assert sorted(m.sequence for m in redelivered) == pending, (channel, durable)
        assert all(m.redelivered for m in redelivered)
        await sub.assert_nothing(0.3)
        # The cluster appends after the migrated messages, and the durable goes on after
        # its last sent one (truncated's durable was sent the message that was cut: as the
        # reference after -file_truncate_bad_eof, it skips the sequence that message had).
        after = max(last_sent[(channel, durable)], last_seqs[channel])
        for _ in range(after + 1 - last_seqs[channel]):
            await owner.publish(channel, b"after the migration")
        (fresh,) = await sub.collect(1, timeout=10)
        assert (fresh.sequence, fresh.data, fresh.redelivered) == (
            after + 1,
            b"after the migration",
            False,
        )
        await owner.close()
    if name in ("plain", "aes", "chacha"):  # each has an offline durable with pending messages
        assert resumed and all(pending for *_, pending in resumed), resumed
