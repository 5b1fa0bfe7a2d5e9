"""The store records as the ``proto`` columns hold them (``spb`` messages, as the
reference writes them)."""

from __future__ import annotations

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, ServerInfo, SubRecord
from stanpkg.stores.record_protos import (
    client_from_proto,
    client_to_proto,
    server_info_from_proto,
    server_info_to_proto,
    sub_to_proto,
)
from stanpkg.stores.record_protos import sub_from_proto as sub_state_from_proto

__all__ = [
    "client_from_row",
    "client_proto",
    "info_from_proto",
    "info_proto",
    "sub_from_proto",
    "sub_proto",
]


def info_proto(info: ServerInfo) -> bytes:
    return server_info_to_proto(info).SerializeToString()


def info_from_proto(data: bytes) -> ServerInfo:
    return server_info_from_proto(spb.ServerInfo.FromString(data))


def client_proto(record: ClientRecord) -> bytes:
    return client_to_proto(record).SerializeToString()


def client_from_row(client_id: str, hb_inbox: str, data: bytes | None) -> ClientRecord:
    """Rows written before the ``proto`` column existed only have ID and inbox."""
    if not data:
        return ClientRecord(id=client_id, hb_inbox=hb_inbox)
    return client_from_proto(spb.ClientInfo.FromString(bytes(data)))


def sub_proto(record: SubRecord) -> bytes:
    return sub_to_proto(record).SerializeToString()


def sub_from_proto(data: bytes) -> SubRecord:
    return sub_state_from_proto(spb.SubState.FromString(bytes(data)))
