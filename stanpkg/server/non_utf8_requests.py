"""Requests that fail to decode only because a string field is not UTF-8.

The reference's decoder (gogo protobuf) takes any bytes as a string; Python's protobuf
refuses a proto3 string that is not UTF-8. Without this module such a request would be
answered "invalid ... request" where the reference answers what its next check says
(protocol.md §3.1, §8.1, §11): a clientID that is not UTF-8 is an invalid ID, is never
registered, owns nothing; a channel or inbox name that is not UTF-8 names nothing that
exists. A request that would pass every check (the reference would then register or
create something under a name that is not UTF-8) is still refused as invalid.

The requests are read again with twins of the protocol messages whose string fields are
bytes (the wire format is the same).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors
from stanpkg.server.clients import is_valid_client_id
from stanpkg.server.sub_validation import request_error

__all__ = [
    "close_error",
    "connect_error",
    "parse",
    "refused_publish",
    "subscription_error",
    "twin_message",
    "unsubscribe_error",
]

_PACKAGE = "stanpkg_non_utf8"
_M = TypeVar("_M", bound=Message)


@cache
def twin_message(name: str) -> type[Message]:
    """The protocol message ``name`` with bytes for its strings, as gogo decodes it."""
    proto = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(proto)
    proto.name = f"{_PACKAGE}/protocol.proto"
    proto.package = _PACKAGE
    for message in proto.message_type:
        for fld in message.field:
            if fld.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                fld.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            if fld.type_name.startswith(".pb."):
                fld.type_name = f".{_PACKAGE}.{fld.type_name[4:]}"
    pool = _pool()
    try:
        pool.FindFileByName(proto.name)
    except KeyError:
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    return descriptor_pool.DescriptorPool()


def _read(name: str, payload: bytes) -> Any:
    try:
        return twin_message(name).FromString(payload)
    except DecodeError:
        return None


def _text(raw: bytes) -> str | None:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def parse(cls: type[_M], payload: bytes) -> _M:
    """``cls.FromString(payload)``, also when only a string value that a later one of
    the same field replaces is not UTF-8 (the last value wins, the reference looks at
    no other). Raises DecodeError as ``FromString`` does otherwise."""
    try:
        return cls.FromString(payload)
    except DecodeError:
        twin = _read(cls.DESCRIPTOR.name, payload)
        if twin is None:
            raise
        return cls.FromString(twin.SerializeToString())  # its last values only


def refused_publish(payload: bytes) -> bytes | None:
    """The PubAck refusing a PubMsg the reference decodes (its guid echoed byte for
    byte), or None when the reference could not decode it either. The reference would
    store it when its publisher is registered; stanpkg stores no channel, guid or reply
    that is not UTF-8."""
    pm = _read("PubMsg", payload)
    if pm is None:
        return None
    ack = twin_message("PubAck")(guid=pm.guid, error=errors.INVALID_PUB_REQ.encode())
    return bytes(ack.SerializeToString())


def connect_error(payload: bytes) -> str:
    req = _read("ConnectRequest", payload)
    if req is None or not req.heartbeatInbox:
        return errors.INVALID_CONN_REQ
    client_id = _text(req.clientID)
    if client_id is None or not is_valid_client_id(client_id):
        return errors.INVALID_CLIENT_ID
    return errors.INVALID_CONN_REQ  # a heartbeat inbox that is no UTF-8 subject


def close_error(payload: bytes) -> str:
    if _read("CloseRequest", payload) is None:
        return errors.INVALID_CLOSE_REQ
    return errors.UNKNOWN_CLIENT  # its only string, the client ID, is not UTF-8


def subscription_error(payload: bytes, registered: Callable[[str], bool]) -> str:
    req = _read("SubscriptionRequest", payload)
    if req is None:
        return errors.INVALID_SUB_REQ
    # The channel-name rules are about ".", "*" and ">": bytes that are not UTF-8 pass.
    subject = req.subject.decode(errors="surrogateescape")
    first = request_error(
        bool(req.clientID), req.ackWaitInSecs, req.maxInFlight, req.startPosition, subject
    )
    if first is not None:
        return first
    client_id = _text(req.clientID)
    if client_id is None or not registered(client_id):
        return errors.UNKNOWN_CLIENT
    return errors.INVALID_SUB_REQ


def unsubscribe_error(
    payload: bytes,
    channel_exists: Callable[[str], bool],
    subscription_exists: Callable[[str, str], bool],
) -> str:
    req = _read("UnsubscribeRequest", payload)
    if req is None:
        return errors.INVALID_UNSUB_REQ
    channel = _text(req.subject)
    if channel is None or not channel_exists(channel):
        return errors.UNKNOWN_CHANNEL
    inbox = _text(req.inbox)
    if inbox is None or not subscription_exists(channel, inbox):
        return errors.INVALID_SUB
    return errors.UNKNOWN_CLIENT  # the client ID is what is not UTF-8
