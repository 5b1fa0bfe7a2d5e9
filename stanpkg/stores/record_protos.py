"""The store interface's records as the ``spb`` protobuf messages durable stores persist.

The FILE store writes these messages into its files and the SQL store into its ``proto``
columns (the reference's formats); both convert through here.
"""

from __future__ import annotations

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, ServerInfo, SubRecord

__all__ = [
    "client_from_proto",
    "client_to_proto",
    "server_info_from_proto",
    "server_info_to_proto",
    "sub_from_proto",
    "sub_to_proto",
]


def server_info_to_proto(info: ServerInfo) -> spb.ServerInfo:
    return spb.ServerInfo(
        ClusterID=info.cluster_id,
        Discovery=info.discovery,
        Publish=info.publish,
        Subscribe=info.subscribe,
        Unsubscribe=info.unsubscribe,
        Close=info.close,
        SubClose=info.sub_close,
        AcksSubs=info.acks_subs,
        NodeID=info.node_id,
    )


def server_info_from_proto(p: spb.ServerInfo) -> ServerInfo:
    return ServerInfo(
        cluster_id=p.ClusterID,
        discovery=p.Discovery,
        publish=p.Publish,
        subscribe=p.Subscribe,
        unsubscribe=p.Unsubscribe,
        close=p.Close,
        sub_close=p.SubClose,
        acks_subs=p.AcksSubs,
        node_id=p.NodeID,
    )


def client_to_proto(record: ClientRecord) -> spb.ClientInfo:
    return spb.ClientInfo(
        ID=record.id,
        HbInbox=record.hb_inbox,
        ConnID=record.conn_id,
        Protocol=record.protocol,
        PingInterval=record.ping_interval,
        PingMaxOut=record.ping_max_out,
    )


def client_from_proto(p: spb.ClientInfo) -> ClientRecord:
    return ClientRecord(
        id=p.ID,
        hb_inbox=p.HbInbox,
        conn_id=p.ConnID,
        protocol=p.Protocol,
        ping_interval=p.PingInterval,
        ping_max_out=p.PingMaxOut,
    )


def sub_to_proto(record: SubRecord) -> spb.SubState:
    return spb.SubState(
        ID=record.id,
        clientID=record.client_id,
        qGroup=record.qgroup,
        inbox=record.inbox,
        ackInbox=record.ack_inbox,
        maxInFlight=record.max_inflight,
        ackWaitInSecs=record.ack_wait_secs,
        durableName=record.durable_name,
        lastSent=record.last_sent,
        isDurable=record.is_durable,
        isClosed=record.is_closed,
    )


def sub_from_proto(p: spb.SubState) -> SubRecord:
    return SubRecord(
        id=p.ID,
        client_id=p.clientID,
        qgroup=p.qGroup,
        inbox=p.inbox,
        ack_inbox=p.ackInbox,
        max_inflight=p.maxInFlight,
        ack_wait_secs=p.ackWaitInSecs,
        durable_name=p.durableName,
        last_sent=p.lastSent,
        is_durable=p.isDurable,
        is_closed=p.isClosed,
    )
