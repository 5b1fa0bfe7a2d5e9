"""The hand-built protocol bytes of server/wire.py against protobuf itself."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from hypothesis import example, given
from hypothesis import strategies as st

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto.encoders import MsgEncoder, encode_varint, pub_msg_head, pub_msg_tail
from stanpkg.server.wire import ack_prefix, ack_sequence, decode_pub_msg, encode_pub_ack

names = st.text(min_size=1, max_size=300)
uint64 = st.integers(min_value=0, max_value=2**64 - 1)


@given(
    name=names,
    stamp=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    first=st.sampled_from([1, 2, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 2**64 - 10]),
    messages=st.lists(st.tuples(st.text(max_size=50), st.binary(max_size=300)), max_size=8),
    big_size=st.sampled_from([127, 128, 16_383, 16_384, 2_097_152]),
)
def test_msg_encoder_writes_what_protobuf_writes(
    name: str, stamp: int, first: int, messages: list[tuple[str, bytes]], big_size: int
) -> None:
    messages = [*messages, ("", b"\x01" * big_size)]  # payload lengths of 1 to 4 bytes
    expected = [
        pb.MsgProto(
            sequence=first + i, subject=name, reply=reply, data=data, timestamp=stamp
        ).SerializeToString()
        for i, (reply, data) in enumerate(messages)
    ]
    assert MsgEncoder(name, stamp).encode_run(first, messages) == expected


# Every varint length's first and last value (the encoder unrolls 1 to 4 bytes).
_VARINT_EDGES = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**64 - 1]


@given(value=st.one_of(uint64, st.sampled_from(_VARINT_EDGES)))
def test_encode_varint_writes_what_protobuf_writes(value: int) -> None:
    # Ack.sequence (field 2, a uint64) is the tag byte 0x10 and the varint.
    expected = pb.Ack(sequence=value).SerializeToString()[1:] if value else b"\x00"
    assert encode_varint(value) == expected


@given(name=names, sequence=uint64)
def test_ack_sequence_reads_what_clients_write(name: str, sequence: int) -> None:
    payload = pb.Ack(subject=name, sequence=sequence).SerializeToString()
    # Sequence 0 is left out of the encoding, and sequences from 2^28 on take more than
    # 4 bytes: not the fast form, decoded by protobuf.
    fast = 0 < sequence < 2**28
    assert ack_sequence(payload, ack_prefix(name)) == (sequence if fast else -1)


@given(name=names, other=names, sequence=st.integers(min_value=1, max_value=2**64 - 1))
def test_ack_sequence_refuses_other_forms(name: str, other: str, sequence: int) -> None:
    prefix = ack_prefix(name)
    ack = pb.Ack(subject=other, sequence=sequence).SerializeToString()
    if other != name:
        assert ack_sequence(ack, prefix) == -1  # another channel's ack
    own = pb.Ack(subject=name, sequence=sequence).SerializeToString()
    assert ack_sequence(own + b"\x18\x01", prefix) == -1  # an unknown field follows
    assert ack_sequence(own[:-1], prefix) == -1  # the varint is cut short
    reordered = (
        pb.Ack(sequence=sequence).SerializeToString() + pb.Ack(subject=name).SerializeToString()
    )
    assert ack_sequence(reordered, prefix) == -1


def test_ack_sequence_refuses_overlong_varints() -> None:
    prefix = ack_prefix("foo")
    assert ack_sequence(prefix + b"\xff" * 9 + b"\x7f", prefix) == -1  # ≥ 2^64
    assert ack_sequence(prefix + b"\x80" * 10 + b"\x01", prefix) == -1  # 11 bytes
    assert ack_sequence(prefix + b"\x81\x00", prefix) == 1  # padded but valid, as protobuf
    assert ack_sequence(prefix + b"\x81\x80", prefix) == -1  # no last byte


@given(st.integers(min_value=1, max_value=2**28 - 1))
def test_ack_sequence_takes_every_varint_up_to_4_bytes(sequence: int) -> None:
    prefix = ack_prefix("foo")
    payload = pb.Ack(subject="foo", sequence=sequence).SerializeToString()
    assert ack_sequence(payload, prefix) == pb.Ack.FromString(payload).sequence == sequence


def _protobuf_fields(payload: bytes) -> tuple[str, str, str, str, bytes, bytes] | None:
    try:
        pm = pb.PubMsg.FromString(payload)
    except DecodeError:
        return None
    return (pm.clientID, pm.guid, pm.subject, pm.reply, pm.data, pm.connID)


pub_msgs = st.builds(
    pb.PubMsg,
    clientID=st.text(max_size=40),
    guid=st.text(max_size=40),
    subject=st.text(max_size=300),
    reply=st.text(max_size=60),
    data=st.binary(max_size=300) | st.sampled_from([b"\x00" * 16_384, b"\x01" * 2_097_152]),
    connID=st.binary(max_size=30),
    sha256=st.binary(max_size=40),
)


@given(pub_msgs)
def test_decode_pub_msg_reads_what_clients_write(msg: pb.PubMsg) -> None:
    payload = msg.SerializeToString()
    assert decode_pub_msg(payload) == _protobuf_fields(payload)


@given(st.lists(pub_msgs, min_size=2, max_size=3))
def test_decode_pub_msg_keeps_the_last_value_of_a_field_given_twice(msgs: list[pb.PubMsg]) -> None:
    payload = b"".join(m.SerializeToString() for m in msgs)  # protobuf merges: last wins
    assert decode_pub_msg(payload) == _protobuf_fields(payload)


@given(pub_msgs, st.binary(max_size=12), st.integers(min_value=0, max_value=400))
@example(pb.PubMsg(guid="g"), b"\x18\x01", 0)  # a varint field: protobuf's to decode
@example(pb.PubMsg(guid="g"), b"\x3a\x00", 0)  # field 7, unknown: kept by protobuf
@example(pb.PubMsg(guid="g"), b"\x12\x01\xff", 0)  # a guid that is not UTF-8
@example(pb.PubMsg(guid="g"), b"\x12\x80\x80\x80\x80\x01", 0)  # a 5-byte length
def test_decode_pub_msg_never_differs_from_protobuf(msg: pb.PubMsg, tail: bytes, cut: int) -> None:
    """Damaged, cut or extended: either the fast path's answer is protobuf's, or it
    leaves the payload to protobuf (None)."""
    payload = msg.SerializeToString() + tail
    for candidate in (payload, payload[: max(0, len(payload) - cut)]):
        fields = decode_pub_msg(candidate)
        if fields is not None:
            assert fields == _protobuf_fields(candidate)


def test_decode_pub_msg_leaves_other_forms_to_protobuf() -> None:
    guid = pb.PubMsg(guid="g").SerializeToString()
    assert decode_pub_msg(guid + b"\x3a\x00") is None  # unknown field
    assert decode_pub_msg(guid + b"\x18\x01") is None  # another wire type
    assert decode_pub_msg(guid + b"\x12\x01\xff") is None  # not UTF-8
    assert decode_pub_msg(guid + b"\x12\x80\x80\x80\x80\x01") is None  # 5-byte length
    assert decode_pub_msg(guid[:-1]) is None  # cut short
    assert decode_pub_msg(b"") == ("", "", "", "", b"", b"")  # all defaults, as protobuf


@given(guid=st.text(max_size=200), error=st.one_of(st.just(""), st.text(max_size=50)))
def test_encode_pub_ack_writes_what_protobuf_writes(guid: str, error: str) -> None:
    # Guids of 127 and 128 bytes are the edge of the one-byte length the fast form takes.
    assert encode_pub_ack(guid, error) == pb.PubAck(guid=guid, error=error).SerializeToString()
    for size in (0, 127, 128):
        edge = "g" * size
        assert encode_pub_ack(edge) == pb.PubAck(guid=edge).SerializeToString()


@given(
    client_id=st.text(max_size=40),
    guid=st.text(min_size=1, max_size=200),
    subject=st.text(max_size=300),
    data=st.binary(max_size=300) | st.sampled_from([b"\x00" * 16_384]),
    conn_id=st.binary(max_size=30),
)
def test_pub_msg_fragments_write_what_protobuf_writes(
    client_id: str, guid: str, subject: str, data: bytes, conn_id: bytes
) -> None:
    # The client's PubMsg: the fragments around the guid, encoded once, and the guid.
    raw = guid.encode()
    head = pub_msg_head(client_id.encode(), len(raw))
    payload = head + raw + pub_msg_tail(subject.encode(), data, conn_id)
    expected = pb.PubMsg(clientID=client_id, guid=guid, subject=subject, data=data, connID=conn_id)
    assert payload == expected.SerializeToString()
