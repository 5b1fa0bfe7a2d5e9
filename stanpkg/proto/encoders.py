"""Protobuf encodings written by hand, for what is encoded once per message: the base-128
varint (sequences, sizes, subscription records), a channel's MsgProtos, the PubAck, the
Ack and the PubMsg. The one place where tags, varints and length-delimited fields are
put together by hand: the server (server/wire.py re-exports what it uses), the client
(client.py) and the load generator's fake server import them from here.

All give protobuf's bytes exactly (tests/server/test_wire.py checks them against it).
"""

from __future__ import annotations

from collections.abc import Sequence

from stanpkg.proto import protocol_pb2 as pb

__all__ = [
    "MsgEncoder",
    "ack_prefix",
    "encode_field",
    "encode_pub_ack",
    "encode_varint",
    "pub_msg_head",
    "pub_msg_tail",
    "redelivered",
]

_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def encode_varint(value: int) -> bytes:
    """``value`` (0 to 2^64 - 1) as protobuf encodes an unsigned varint.

    The common lengths are unrolled: the bytes are put together as one little-endian
    integer, whose ``to_bytes`` is a C call in the compiled build (stanpkg/hot_path.py),
    where ``bytes((a, b, c))`` built a tuple first (70 against 20 ns)."""
    if value < 0x80:
        return _ONE_BYTE[value]
    low = value & 0x7F | 0x80
    if value < 0x4000:
        return (low | (value >> 7) << 8).to_bytes(2, "little")
    low |= (value >> 7 & 0x7F | 0x80) << 8
    if value < 0x200000:
        return (low | (value >> 14) << 16).to_bytes(3, "little")
    if value < 0x10000000:
        low |= (value >> 14 & 0x7F | 0x80) << 16
        return (low | (value >> 21) << 24).to_bytes(4, "little")
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class MsgEncoder:
    """Encodes the MsgProtos of one channel and one timestamp (a publish batch), byte for
    byte as protobuf does (fields in number order, defaults left out). The subject and
    timestamp fields are encoded once by protobuf; per message only the sequence and the
    payload's length remain: a third of the time of building a message object for each
    publish (profile with bench/flamegraph.py)."""

    __slots__ = ("_subject", "_timestamp")

    def __init__(self, subject: str, timestamp: int) -> None:
        self._subject = pb.MsgProto(subject=subject).SerializeToString()
        self._timestamp = pb.MsgProto(timestamp=timestamp).SerializeToString()

    def encode_run(self, first: int, messages: Sequence[tuple[str, bytes]]) -> list[bytes]:
        """The MsgProtos of ``messages`` (reply, data), numbered from ``first``."""
        subject, stamp = self._subject, self._timestamp
        sizes: dict[int, bytes] = {}  # payloads of one batch are mostly of a few sizes
        records: list[bytes] = []
        seq = first
        for reply, data in messages:
            number = encode_varint(seq)
            middle = subject + pb.MsgProto(reply=reply).SerializeToString() if reply else subject
            if data:
                size = len(data)
                length = sizes.get(size)
                if length is None:
                    length = sizes[size] = encode_varint(size)
                records.append(b"\x08%b%b\x22%b%b%b" % (number, middle, length, data, stamp))
            else:
                records.append(b"\x08%b%b%b" % (number, middle, stamp))
            seq += 1
        return records


def redelivered(record: bytes, count: int) -> bytes:
    """A stored MsgProto with ``redelivered = true`` and ``redeliveryCount = count``
    appended (readers keep the last occurrence of a field; stored records have neither)."""
    return record + b"\x30\x01\x38" + encode_varint(count)


def encode_field(number: int, data: bytes) -> bytes:
    """A length-delimited field (empty values are left out, as proto3 does)."""
    return b"" if not data else encode_varint(number << 3 | 2) + encode_varint(len(data)) + data


# The guid field's tag and one-byte length, for every length that takes one byte (an
# empty guid is left out, as protobuf does).
_GUID_FIELD = (b"", *(b"\x0a" + bytes((size,)) for size in range(1, 0x80)))


def encode_pub_ack(guid: str, error: str = "") -> bytes:
    """``PubAck{guid, error}``; the common success case is one concatenation."""
    if error:
        return pb.PubAck(guid=guid, error=error).SerializeToString()
    raw = guid.encode()
    if len(raw) < 0x80:
        return _GUID_FIELD[len(raw)] + raw
    return pb.PubAck(guid=guid).SerializeToString()


def ack_prefix(channel: str) -> bytes:
    """The bytes every ``Ack`` of this channel starts with as clients encode it: the
    subject field, then the sequence field's tag. The sequence's :func:`encode_varint`
    follows (server/wire.py's ``ack_sequence`` reads it back)."""
    return pb.Ack(subject=channel).SerializeToString() + b"\x10"


def pub_msg_head(client_id: bytes, guid_size: int) -> bytes:
    """A ``PubMsg``'s bytes up to its guid (``guid_size`` bytes, not 0): clientID, then
    the guid's tag and length. The guid follows, then :func:`pub_msg_tail`."""
    return encode_field(1, client_id) + b"\x12" + encode_varint(guid_size)


def pub_msg_tail(subject: bytes, data: bytes, conn_id: bytes) -> bytes:
    """A ``PubMsg``'s bytes after its guid: subject, data, connID."""
    return encode_field(3, subject) + encode_field(5, data) + encode_field(6, conn_id)
