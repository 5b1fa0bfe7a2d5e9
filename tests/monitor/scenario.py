"""The scripted scenario of the endpoint tests: three clients, plain/durable/queue
subscriptions, a limited channel, a redelivery, and what each endpoint must then show.

Everything expected is derived from what the clients themselves sent and received
(inboxes, ack inboxes, message sizes), never read back from the server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from stanpkg.proto import protocol_pb2 as pb
from tests.server.stan_client import StanClient, StanSub

CONFIG = """
streaming {
  store_limits {
    max_channels: 20
    max_msgs: 50
    max_bytes: 1MB
    max_age: "1h30m"
    max_subs: 10
    channels {
      "orders.*": { max_msgs: 3 }
      "audit.>": { max_bytes: 10KB, max_inactivity: "1h" }
      "audit.trail": { max_subs: 6 }
    }
  }
}
"""

ORDERS = "orders.new"
AUDIT = "audit.trail"
EMPTY = "misc.empty"


@dataclass
class Expected:
    """What the server must report, built from the clients' side."""

    clients: dict[str, StanClient] = field(default_factory=dict)
    subs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → Subscriptionz
    sub_channel: dict[str, str] = field(default_factory=dict)
    stored_sizes: dict[str, dict[int, int]] = field(default_factory=dict)  # channel → seq → size
    in_msgs: int = 0
    in_bytes: int = 0
    out_msgs: int = 0
    out_bytes: int = 0
    redelivered: int = 0
    all_subs: list[StanSub] = field(default_factory=list)

    def subscriptionz(self, *names: str) -> list[dict[str, Any]]:
        return [self.subs[name] for name in names]


def _record(
    expected: Expected,
    name: str,
    sub: StanSub,
    *,
    client_id: str | None = None,
    durable_name: str = "",
    queue_name: str = "",
    is_durable: bool = False,
    is_offline: bool = False,
    max_inflight: int = 1024,
    ack_wait: int = 30,
    last_sent: int,
    pending_count: int = 0,
    is_stalled: bool = False,
) -> None:
    doc: dict[str, Any] = {
        "client_id": sub.client.client_id if client_id is None else client_id,
        "inbox": sub.inbox,
        "ack_inbox": sub.ack_inbox,
    }
    if durable_name:
        doc["durable_name"] = durable_name
    if queue_name:
        doc["queue_name"] = queue_name
    doc.update(
        is_durable=is_durable,
        is_offline=is_offline,
        max_inflight=max_inflight,
        ack_wait=ack_wait,
        last_sent=last_sent,
        pending_count=pending_count,
        is_stalled=is_stalled,
    )
    expected.subs[name] = doc
    expected.sub_channel[name] = sub.channel


async def _publish(expected: Expected, client: StanClient, channel: str, data: bytes) -> None:
    pm = client.pub_msg(channel, data)
    payload = pm.SerializeToString()
    raw = await client.request(f"{client.resp.pubPrefix}.{channel}", payload)
    assert not pb.PubAck.FromString(raw).error
    expected.in_msgs += 1
    expected.in_bytes += len(payload)


async def _wait(sub: StanSub, count: int, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while len(sub.received) < count:
        assert asyncio.get_running_loop().time() < deadline, (sub.channel, len(sub.received))
        await asyncio.sleep(0.01)
    if not sub.manual_acks:
        # The helper client skips acks for messages that beat the subscription's reply.
        for msg in sub.received:
            await sub.ack(msg)


async def _subscribe(expected: Expected, client: StanClient, channel: str, **kw: Any) -> StanSub:
    sub = await client.subscribe(channel, **kw)
    expected.all_subs.append(sub)
    return sub


async def run(url: str, cluster_id: str) -> Expected:
    expected = Expected()
    for client_id in ("alpha", "beta", "gamma"):
        expected.clients[client_id] = await StanClient.connect(url, cluster_id, client_id)
    alpha, beta, gamma = (expected.clients[c] for c in ("alpha", "beta", "gamma"))

    # orders.new keeps 3 of 5 messages (orders.* max_msgs 3): first_seq 3.
    for i in range(1, 6):
        await _publish(expected, alpha, ORDERS, f"order-{i}".encode())
    for i in range(1, 3):
        await _publish(expected, alpha, AUDIT, f"audit <&> {i}".encode())

    # beta: a stalled plain subscription (in flight 2, never acks), one on audit.trail,
    # and a second plain one on orders.new that starts with new messages only.
    a = await _subscribe(expected, beta, ORDERS, start=pb.First, max_inflight=2, manual_acks=True)
    await _wait(a, 2)
    _record(expected, "A", a, max_inflight=2, last_sent=4, pending_count=2, is_stalled=True)
    b = await _subscribe(expected, beta, AUDIT, start=pb.First)
    await _wait(b, 2)
    _record(expected, "B", b, last_sent=2)
    c = await _subscribe(expected, beta, ORDERS)
    _record(expected, "C", c, last_sent=5)

    # beta: a durable that read everything, then closed: offline.
    dur = await _subscribe(expected, beta, AUDIT, durable="dur", start=pb.First)
    await _wait(dur, 2)
    await asyncio.sleep(0.1)  # its acks in
    await dur.close()
    _record(expected, "dur", dur, durable_name="dur", is_durable=True, is_offline=True, last_sent=2)

    # gamma: a durable with a 1 s ack wait that never acks: redelivered, then closed.
    redo = await _subscribe(
        expected, gamma, AUDIT, durable="redo", start=pb.First, ack_wait=1, manual_acks=True
    )
    await _wait(redo, 4, timeout=10)
    await redo.close()
    await asyncio.sleep(0.2)  # resends published before the close are in
    expected.redelivered += len(redo.received) - 2
    _record(
        expected,
        "redo",
        redo,
        durable_name="redo",
        is_durable=True,
        is_offline=True,
        ack_wait=1,
        last_sent=2,
        pending_count=2,
    )

    # gamma: a plain queue group member.
    q1 = await _subscribe(expected, gamma, AUDIT, queue="q1", start=pb.First)
    await _wait(q1, 2)
    _record(expected, "q1", q1, queue_name="q1", last_sent=2)

    # A durable queue group: gamma then alpha join, both leave: the group is a shadow
    # showing the last member (alpha) and the group's position.
    dq_gamma = await _subscribe(
        expected, gamma, ORDERS, queue="workers", durable="dq", start=pb.First
    )
    await _wait(dq_gamma, 3)
    dq_alpha = await _subscribe(
        expected, alpha, ORDERS, queue="workers", durable="dq", max_inflight=7, ack_wait=11
    )
    await asyncio.sleep(0.1)
    await dq_gamma.close()
    await dq_alpha.close()
    _record(
        expected,
        "dq",
        dq_alpha,
        queue_name="dq:workers",
        is_durable=True,
        is_offline=True,
        max_inflight=7,
        ack_wait=11,
        last_sent=5,
    )

    # A channel created by a subscription only, left without subscriptions.
    empty = await _subscribe(expected, alpha, EMPTY)
    await empty.unsubscribe()

    await asyncio.sleep(0.2)
    for sub in expected.all_subs:
        for msg in sub.received:
            size = len(msg.SerializeToString())
            expected.out_msgs += 1
            expected.out_bytes += size
            if not msg.redelivered:
                expected.stored_sizes.setdefault(sub.channel, {})[msg.sequence] = size
    return expected


async def close_clients(expected: Expected) -> None:
    for client in expected.clients.values():
        await client.close()
