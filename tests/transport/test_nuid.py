from __future__ import annotations

from stanpkg.transport.nuid import (
    BASE,
    DIGITS,
    MAX_SEQ,
    PREFIX_LEN,
    SEQ_LEN,
    TOTAL_LEN,
    Nuid,
    next_nuid,
)


def base62(value: int, width: int) -> str:
    digits = []
    for _ in range(width):
        value, digit = divmod(value, BASE)
        digits.append(DIGITS[digit])
    return "".join(reversed(digits))


def test_shape_and_uniqueness() -> None:
    gen = Nuid()
    ids = [gen.next() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == TOTAL_LEN == 22 for i in ids)
    assert set("".join(ids)) <= set(DIGITS)
    assert len({i[:PREFIX_LEN] for i in ids}) == 1  # same prefix until the sequence wraps
    assert len(next_nuid()) == 22 and next_nuid() != next_nuid()


def test_sequence_part_is_base62_of_the_sequence() -> None:
    gen = Nuid()
    for _ in range(10_000):
        value = gen.next()
        assert value[PREFIX_LEN:] == base62(gen.sequence, SEQ_LEN)


def test_wrap_gives_new_prefix() -> None:
    gen = Nuid()
    first = gen.next()
    # Put the sequence right below the maximum: the next value must use a new prefix.
    gen._high, gen._low = divmod(MAX_SEQ - 1, BASE * BASE)
    wrapped = gen.next()
    assert wrapped[:PREFIX_LEN] != first[:PREFIX_LEN]
    assert wrapped[PREFIX_LEN:] == base62(gen.sequence, SEQ_LEN)


def test_generators_differ() -> None:
    assert Nuid().next()[:PREFIX_LEN] != Nuid().next()[:PREFIX_LEN]
