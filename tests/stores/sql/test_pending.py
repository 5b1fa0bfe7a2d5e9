"""The caching-mode SubsPending rows: whatever happens, replaying the stored rows gives
exactly the pending sequences, and fully acknowledged rows do not pile up."""

from __future__ import annotations

import itertools
import json
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stanpkg.stores.sql import pending as pending_module
from stanpkg.stores.sql.pending import COMPACT_ROWS, MAX_PER_ROW, SubPending, Write, decode_seqs

Table = dict[int, tuple[int, int, list[int], list[int]]]  # row → (seq, lastsent, pending, acks)


def apply(table: Table, writes: list[Write]) -> int:
    """Apply writes like the SQL statements would; returns the lastsent column."""
    last_sent_column = 0
    for write in writes:
        match write:
            case ("del_row", row_id):
                del table[row_id]  # type: ignore[arg-type]
            case ("del_all",):
                table.clear()
            case ("row", row_id, last_sent, pending, acks):
                assert row_id not in table
                table[row_id] = (0, last_sent, decode_seqs(pending), decode_seqs(acks))  # type: ignore
            case ("last_sent", value):
                last_sent_column = value  # type: ignore[assignment]
    return last_sent_column


def replay(table: Table, last_sent_column: int = 0) -> SubPending:
    """What recovery does with the rows (row order)."""
    state = SubPending(1, last_sent_column)
    for row_id in sorted(table):
        seq, last_sent, pending, acks = table[row_id]
        state.load(row_id, seq, last_sent, pending, acks)
    state.finish_load()
    return state


def test_rows_are_written_and_collected() -> None:
    rows = itertools.count(1)
    state, table = SubPending(1), {}
    for seq in (1, 2, 3):
        state.sent(seq)
    apply(table, state.flush(lambda: next(rows)))
    assert table == {1: (0, 3, [1, 2, 3], [])}
    state.acked(2)
    state.sent(4)
    state.sent(5)
    state.acked(5)  # sent and acked between two flushes: never written
    apply(table, state.flush(lambda: next(rows)))
    assert table[2] == (0, 5, [4], [2])
    state.acked(1)
    state.acked(3)
    apply(table, state.flush(lambda: next(rows)))
    assert sorted(table) == [2]  # row 1 fully acked: deleted with the ack rows it needed
    assert replay(table).pending() == [4]


def test_json_columns_match_the_reference_encoding() -> None:
    state = SubPending(7)
    state.sent(10)
    state.sent(2)
    [write] = state.flush(lambda: 1)
    assert write == ("row", 1, 10, b"[2,10]", None)


def test_large_batches_split_rows() -> None:
    rows = itertools.count(1)
    state, table = SubPending(1), {}
    for seq in range(1, MAX_PER_ROW * 2 + 2):
        state.sent(seq)
    apply(table, state.flush(lambda: next(rows)))
    assert [len(v[2]) for v in table.values()] == [MAX_PER_ROW, MAX_PER_ROW, 1]
    assert replay(table).pending() == list(range(1, MAX_PER_ROW * 2 + 2))


def test_a_stuck_message_does_not_make_rows_pile_up() -> None:
    rows = itertools.count(1)
    state, table = SubPending(1), {}
    state.sent(1)  # never acknowledged
    seq = 1
    for _ in range(500):
        seq += 1
        state.sent(seq)
        if seq > 2:
            state.acked(seq - 1)
        apply(table, state.flush(lambda: next(rows)))
        assert len(table) <= COMPACT_ROWS + 1
    assert replay(table).pending() == [1, seq]


def test_write_through_rows_are_read_too() -> None:
    table: Table = {1: (5, 0, [], []), 2: (6, 0, [], [])}
    state = replay(table)
    assert (state.pending(), state.last_sent) == ([5, 6], 6)
    state.acked(5)
    rows = itertools.count(3)
    apply(table, state.flush(lambda: next(rows)))
    assert sorted(table) == [2]


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(1, 4)),
        st.tuples(st.just("ack"), st.integers(0, 30)),
        st.tuples(st.just("flush"), st.just(0)),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=120,
)


@pytest.mark.parametrize("compact_rows", [2, COMPACT_ROWS])
@settings(max_examples=200, deadline=None)
@given(ops=_ops)
def test_replay_always_gives_the_pending_sequences(
    compact_rows: int, ops: list[tuple[str, int]]
) -> None:
    with patch.object(pending_module, "COMPACT_ROWS", compact_rows):
        _check_replay(ops)


def _check_replay(ops: list[tuple[str, int]]) -> None:
    rows = itertools.count(1)
    state, table = SubPending(1), {}
    truth: set[int] = set()
    next_seq, last_sent, column = 1, 0, 0
    for op, arg in ops:
        if op == "send":
            for _ in range(arg):
                state.sent(next_seq)
                truth.add(next_seq)
                last_sent = next_seq
                next_seq += 1
        elif op == "ack":
            pending = sorted(truth)
            if pending:
                seq = pending[arg % len(pending)]
                truth.discard(seq)
                state.acked(seq)
        else:
            column = apply(table, state.flush(lambda: next(rows))) or column
            recovered = replay(table, column)
            assert recovered.pending() == sorted(truth)
            assert recovered.last_sent == last_sent
            if op == "restart":
                state = recovered
                column = apply(table, state.flush(lambda: next(rows))) or column
    column = apply(table, state.flush(lambda: next(rows))) or column
    assert replay(table, column).pending() == sorted(truth)
    if not truth:
        assert not table  # everything acknowledged: no row left


def test_decode_accepts_what_go_writes() -> None:
    assert decode_seqs(json.dumps([1, 18446744073709551615]).encode()) == [1, 2**64 - 1]
    assert decode_seqs(None) == []
    assert decode_seqs(b"null") == []
