"""The hand-built protocol bytes of server/wire.py against protobuf itself."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.wire import MsgEncoder, ack_prefix, ack_sequence

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
