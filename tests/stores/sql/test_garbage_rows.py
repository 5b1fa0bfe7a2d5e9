"""Garbage in the SQL tables (rows another program or a bad restore left): the store
either recovers everything else intact or refuses with an error naming the table and the
row; never an unexpected exception."""

from __future__ import annotations

import pytest

from stanpkg.stores.base import StoreError
from tests.stores.sql.conftest import Target
from tests.stores.sql.helpers import client, payload, publish, server_info, sub_record

GARBAGE = b"\xff\xfe garbage \x00\x07"


def _populate(target: Target) -> None:
    store = target.open()
    assert store.recover() is None
    store.init(server_info())
    store.add_client(client("me"))
    channel = store.create_channel("foo")
    publish(channel.msgs, [b"one", b"two", b"three"])
    record = sub_record(durable="d")
    channel.subs.create(record)
    channel.subs.record_sent(record.id, [1, 2, 3])
    store.close()


def _recover_error(target: Target) -> str:
    store = target.open()
    try:
        with pytest.raises(StoreError) as info:
            store.recover()
    finally:
        store.close()
    return str(info.value)


@pytest.mark.parametrize(
    ("statement", "names"),
    [
        ("UPDATE ServerInfo SET proto=?", ("table ServerInfo",)),
        ("UPDATE Clients SET proto=?", ("table Clients", '"me"')),
        ("UPDATE Subscriptions SET proto=?", ("table Subscriptions", "subid 1", '"foo"')),
    ],
)
def test_undecodable_proto_column(target: Target, statement: str, names: tuple[str, ...]) -> None:
    _populate(target)
    target.execute(statement, (GARBAGE,))
    error = _recover_error(target)
    assert error.startswith("sql: "), error
    for name in names:
        assert name in error, error


def test_undecodable_pending_lists(target: Target) -> None:
    _populate(target)
    target.execute(
        "INSERT INTO SubsPending (subid, {row}, lastsent, pending, acks) VALUES (1, 99, 3, ?, ?)",
        (GARBAGE, b"[1,"),
    )
    error = _recover_error(target)
    assert "table SubsPending, row subid 1 row 99" in error, error


def test_garbage_message_rows_do_not_hide_the_good_ones(target: Target) -> None:
    _populate(target)
    # A row past the last message with undecodable data, NULL timestamp and size.
    target.execute(
        "INSERT INTO Messages (id, seq, timestamp, size, data) VALUES (1, 5, NULL, NULL, ?)",
        (GARBAGE,),
    )
    store = target.open()
    try:
        state = store.recover()
        assert state is not None
        msgs = state.channels[0].store.msgs
        assert [payload(msgs, seq) for seq in (1, 2, 3)] == [b"one", b"two", b"three"]
    finally:
        store.close()
