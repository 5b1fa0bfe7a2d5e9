"""The incremental protocol parser, fed without a socket: every split point, garbage."""

from __future__ import annotations

from typing import Any

import pytest

from stanpkg.transport.errors import ProtocolError
from stanpkg.transport.parser import ProtocolParser, Subscription


class RecordingParser(ProtocolParser):
    def __init__(self) -> None:
        self.subs: dict[bytes, Subscription] = {}
        super().__init__(self.subs)
        self.events: list[tuple[Any, ...]] = []
        self.errors: list[Exception] = []
        self.done: list[int] = []

    def add(self, sid: int, status: bool = False) -> Subscription:
        def handler(subject: str, reply: str, payload: bytes) -> None:
            self.events.append(("msg", sid, subject, reply, payload))

        def on_status(subject: str, code: int) -> None:
            self.events.append(("status", sid, subject, code))

        sub = Subscription(sid, f"s{sid}", "", handler, on_status if status else None)
        self.subs[sub.sid_bytes] = sub
        return sub

    def _on_info(self, info: dict[str, Any]) -> None:
        self.events.append(("info", info))

    def _on_ping(self) -> None:
        self.events.append(("ping",))

    def _on_pong(self) -> None:
        self.events.append(("pong",))

    def _on_err(self, text: str) -> None:
        self.events.append(("err", text))

    def _on_handler_error(self, exc: Exception) -> None:
        self.errors.append(exc)

    def _on_sub_done(self, sub: Subscription) -> None:
        self.done.append(sub.sid)
        del self.subs[sub.sid_bytes]


def msg(subject: str, sid: int, payload: bytes, reply: str = "") -> bytes:
    reply_part = f" {reply}" if reply else ""
    return f"MSG {subject} {sid}{reply_part} {len(payload)}\r\n".encode() + payload + b"\r\n"


def hmsg(subject: str, sid: int, header: bytes, payload: bytes, reply: str = "") -> bytes:
    reply_part = f" {reply}" if reply else ""
    total = len(header) + len(payload)
    line = f"HMSG {subject} {sid}{reply_part} {len(header)} {total}\r\n".encode()
    return line + header + payload + b"\r\n"


STREAM = b"".join(
    [
        b'INFO {"server_id":"X","max_payload":1048576,"headers":true} \r\n',
        b"+OK\r\n",
        b"PING\r\n",
        msg("foo", 1, b"hello"),
        msg("foo.bar", 1, b"", reply="_INBOX.abc"),
        msg("foo", 2, b"line\r\nbreaks\r\nMSG inside\r\n", reply="r"),
        b"PONG\r\n",
        hmsg("h", 1, b"NATS/1.0\r\nA: b\r\n\r\n", b"with headers", reply="rr"),
        hmsg("_INBOX.x.1", 3, b"NATS/1.0 503\r\n\r\n", b""),
        msg("big", 2, bytes(range(256)) * 40),
        b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n",
        msg("unknown", 99, b"dropped"),
        msg("last", 1, b"end"),
    ]
)

EXPECTED: list[tuple[Any, ...]] = [
    ("info", {"server_id": "X", "max_payload": 1048576, "headers": True}),
    ("ping",),
    ("msg", 1, "foo", "", b"hello"),
    ("msg", 1, "foo.bar", "_INBOX.abc", b""),
    ("msg", 2, "foo", "r", b"line\r\nbreaks\r\nMSG inside\r\n"),
    ("pong",),
    ("msg", 1, "h", "rr", b"with headers"),
    ("status", 3, "_INBOX.x.1", 503),
    ("msg", 2, "big", "", bytes(range(256)) * 40),
    ("err", 'Permissions Violation for Publish to "x"'),
    ("msg", 1, "last", "", b"end"),
]


def fresh() -> RecordingParser:
    parser = RecordingParser()
    for sid in (1, 2):
        parser.add(sid)
    parser.add(3, status=True)
    return parser


def test_whole_stream_in_one_read() -> None:
    parser = fresh()
    parser.feed(STREAM)
    assert parser.events == EXPECTED
    assert parser.in_bytes == len(STREAM)


def test_every_split_point() -> None:
    for cut in range(1, len(STREAM)):
        parser = fresh()
        parser.feed(STREAM[:cut])
        parser.feed(STREAM[cut:])
        assert parser.events == EXPECTED, cut


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000])
def test_fixed_size_chunks(size: int) -> None:
    parser = fresh()
    for i in range(0, len(STREAM), size):
        parser.feed(STREAM[i : i + size])
    assert parser.events == EXPECTED


def test_many_messages_across_reads() -> None:
    parser = fresh()
    payloads = [bytes([i % 251]) * (i % 300) for i in range(2000)]
    data = STREAM[: STREAM.index(b"+OK")] + b"".join(msg("m", 1, p) for p in payloads)
    for i in range(0, len(data), 4093):
        parser.feed(data[i : i + 4093])
    got = [event[4] for event in parser.events if event[0] == "msg"]
    assert got == payloads
    assert parser.in_msgs == len(payloads)


def test_info_must_come_first() -> None:
    parser = fresh()
    with pytest.raises(ProtocolError, match="INFO not received"):
        parser.feed(b"HTTP/1.1 400 Bad Request\r\n")


def test_info_prefix_split_is_accepted() -> None:
    parser = fresh()
    parser.feed(b"IN")
    parser.feed(b'FO {"a":1}\r\n')
    assert parser.events == [("info", {"a": 1})]


@pytest.mark.parametrize(
    "garbage",
    [
        b"WHAT IS THIS\r\n",
        b"MSG foo 1 notanumber\r\nxx\r\n",
        b"MSG foo 1 2\r\nabcd\r\n",  # payload longer than announced: no CRLF after it
        b"MSG\r\n",
        b"MSG foo 2\r\nxx\r\n",  # no sid: three fields
        b"MSG foo 1 r extra 2\r\nxx\r\n",  # six fields
        b"MSG foo 1 -2\r\nxx\r\n",
        b"MSG f\xffo 1 2\r\nxx\r\n",  # a subject that is not UTF-8
        b"INFO {not json\r\n",
        b"HMSG foo 1 10 5\r\n0123456789\r\n",  # header larger than the total
    ],
)
def test_garbage_raises_protocol_error(garbage: bytes) -> None:
    parser = fresh()
    parser.feed(b"INFO {}\r\n")
    with pytest.raises(ProtocolError):
        parser.feed(garbage)


def test_endless_line_is_garbage() -> None:
    parser = fresh()
    parser.feed(b"INFO {}\r\n")
    with pytest.raises(ProtocolError, match="control line"):
        for _ in range(100):
            parser.feed(b"x" * 4096)


def test_handler_errors_are_reported_and_parsing_goes_on() -> None:
    parser = fresh()

    def boom(subject: str, reply: str, payload: bytes) -> None:
        raise RuntimeError("handler failed")

    parser.subs[b"1"].handler = boom
    parser.feed(b"INFO {}\r\n" + msg("a", 1, b"x") + msg("b", 2, b"y"))
    assert [str(e) for e in parser.errors] == ["handler failed"]
    assert parser.events[-1] == ("msg", 2, "b", "", b"y")


def test_max_msgs_reached_calls_done_once() -> None:
    parser = fresh()
    parser.subs[b"1"].max_msgs = 2
    parser.feed(b"INFO {}\r\n" + msg("a", 1, b"1") + msg("a", 1, b"2") + msg("a", 1, b"3"))
    assert [e[4] for e in parser.events if e[0] == "msg"] == [b"1", b"2"]
    assert parser.done == [1]


def test_a_repeated_msg_line_reads_the_same_each_time() -> None:
    """MSG lines are remembered once read: the same line again, split across reads or
    not, dispatches as the first did, and a bad terminator after it is still refused."""
    parser = fresh()
    stream = b"INFO {}\r\n" + msg("acks", 1, b"ab", reply="r") * 3 + msg("acks", 1, b"cd")
    for chunk in (stream[:30], stream[30:31], stream[31:]):
        parser.feed(chunk)
    assert [e for e in parser.events if e[0] == "msg"] == [
        ("msg", 1, "acks", "r", b"ab"),
        ("msg", 1, "acks", "r", b"ab"),
        ("msg", 1, "acks", "r", b"ab"),
        ("msg", 1, "acks", "", b"cd"),
    ]
    with pytest.raises(ProtocolError, match="not terminated"):
        parser.feed(b"MSG acks 1 r 2\r\nabXY")


def test_a_remembered_msg_line_follows_its_subscription() -> None:
    """The sid is looked up for every message: after an unsubscribe the line's messages
    are dropped, and a subscription added again under that sid gets them."""
    parser = fresh()
    parser.feed(b"INFO {}\r\n" + msg("a", 1, b"1"))
    del parser.subs[b"1"]
    parser.feed(msg("a", 1, b"2"))
    parser.add(1)
    parser.feed(msg("a", 1, b"3"))
    assert [e[4] for e in parser.events if e[0] == "msg"] == [b"1", b"3"]


def test_lines_unique_per_message_stay_bounded() -> None:
    """A client replying to a new inbox per message makes every line new: each is still
    read right, and what is remembered stays bounded."""
    parser = fresh()
    parser.feed(b"INFO {}\r\n")
    for n in range(3000):
        parser.feed(msg("a", 2, b"x", reply=f"_INBOX.{n}"))
    replies = [e[3] for e in parser.events if e[0] == "msg"]
    assert replies == [f"_INBOX.{n}" for n in range(3000)]
    assert len(parser._msg_lines) <= 1024  # the bound is the point


def test_a_line_as_long_as_the_one_before_is_read_for_what_it_is() -> None:
    """The parser guesses a line ends where the previous one's length says and takes the
    guess only for a remembered MSG line there: another line of that length (another
    subject, a control line, an HMSG), a longer line starting with the same bytes, and a
    CRLF inside a payload at that offset are all read for what they are."""
    parser = fresh()
    known = msg("abc", 1, b"x" * 12)  # "MSG abc 1 12": 12 bytes of line
    assert known.index(b"\r\n") == 12
    stream = b"".join(
        [
            b"INFO {}\r\n",
            known,
            msg("xyz", 1, b"y" * 12),  # same length, other subject
            known,
            hmsg("a", 1, b"NATS", b"z"),  # "HMSG a 1 4 5": same length
            known,
            msg("abc", 1, b"w" * 120),  # "MSG abc 1 120": starts with the known line
            known,
            msg("abc", 2, b"ab\r\n\r\nabcdefgh"),  # CRLF twelve bytes into the payload
            b"PING\r\n",
            known,
        ]
    )
    for cut in range(1, len(stream)):
        parser = fresh()
        parser.feed(stream[:cut])
        parser.feed(stream[cut:])
        assert [e[1:] for e in parser.events if e[0] != "info"] == [
            (1, "abc", "", b"x" * 12),
            (1, "xyz", "", b"y" * 12),
            (1, "abc", "", b"x" * 12),
            (1, "a", "", b"z"),
            (1, "abc", "", b"x" * 12),
            (1, "abc", "", b"w" * 120),
            (1, "abc", "", b"x" * 12),
            (2, "abc", "", b"ab\r\n\r\nabcdefgh"),
            (),
            (1, "abc", "", b"x" * 12),
        ], cut
