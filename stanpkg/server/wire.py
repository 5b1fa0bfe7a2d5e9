"""Protocol bytes built or recognized by hand where protobuf objects would cost more."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto import spb_pb2 as spb

__all__ = ["encode_pub_ack", "is_ctrl_msg", "redelivered"]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def redelivered(record: bytes, count: int) -> bytes:
    """A stored MsgProto with ``redelivered = true`` and ``redeliveryCount = count``
    appended (readers keep the last occurrence of a field; stored records have neither)."""
    return record + b"\x30\x01\x38" + _varint(count)


def encode_pub_ack(guid: str, error: str = "") -> bytes:
    """``PubAck{guid, error}``; the common success case is three concatenations."""
    if error:
        return pb.PubAck(guid=guid, error=error).SerializeToString()
    raw = guid.encode()
    if len(raw) < 0x80:
        return b"\x0a" + bytes((len(raw),)) + raw
    return pb.PubAck(guid=guid).SerializeToString()


def is_ctrl_msg(payload: bytes) -> bool:
    """Legacy control messages (servers ≤ 0.7) on publish subjects and ack inboxes are
    dropped silently rather than answered as errors."""
    try:
        spb.CtrlMsg.FromString(payload)
    except DecodeError:
        return False
    return True
