"""Building store inputs the way the server does."""

from __future__ import annotations

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import ClientRecord, MessageBatch, MessageStore, ServerInfo, SubRecord


def server_info(cluster_id: str = "test-cluster") -> ServerInfo:
    return ServerInfo.for_cluster(cluster_id, "_STAN.discover")


def client(client_id: str = "me") -> ClientRecord:
    return ClientRecord(id=client_id, hb_inbox=f"_INBOX.{client_id}", conn_id=b"cid", protocol=1)


def sub_record(client_id: str = "me", durable: str = "", queue: str = "") -> SubRecord:
    return SubRecord(
        client_id=client_id,
        inbox=f"_INBOX.in.{client_id}",
        ack_inbox=f"_INBOX.ack.{client_id}",
        max_inflight=1024,
        ack_wait_secs=30,
        qgroup=queue,
        durable_name=durable,
        is_durable=bool(durable),
    )


def publish(msgs: MessageStore, payloads: list[bytes], stamp: int = 1_000) -> list[int]:
    """Store one batch like the server: one timestamp; the sequences the store gave."""
    first, last = msgs.store(MessageBatch(stamp, [("", data) for data in payloads]))
    return list(range(first, last + 1))


def payload(msgs: MessageStore, seq: int) -> bytes | None:
    record = msgs.lookup(seq)
    return None if record is None else pb.MsgProto.FromString(record).data
