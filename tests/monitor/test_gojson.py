"""Go's JSON, time, uptime and Atoi as the reference's monitoring output shows them."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from stanpkg.monitor.gojson import go_atoi, go_json, go_time, go_uptime


def test_marshal_indent_layout() -> None:
    doc = {"b": 1, "a": [], "m": {}, "l": [1, {"x": True, "y": None}], "s": "é"}
    assert go_json(doc) == (
        "{\n"
        '  "b": 1,\n'
        '  "a": [],\n'
        '  "m": {},\n'
        '  "l": [\n'
        "    1,\n"
        "    {\n"
        '      "x": true,\n'
        '      "y": null\n'
        "    }\n"
        "  ],\n"
        '  "s": "é"\n'
        "}"
    )


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("foo.>", '"foo.\\u003e"'),
        ("<a&b>", '"\\u003ca\\u0026b\\u003e"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("\b\f\n\r\t\x01\x7f", '"\\u0008\\u000c\\n\\r\\t\\u0001\x7f"'),
        ('q"\\b', '"q\\"\\\\b"'),  # an escaped backslash followed by "b" stays as is
        ("\\\\f", '"\\\\\\\\f"'),
        ("日本", '"日本"'),
    ],
)
def test_string_escapes(text: str, encoded: str) -> None:
    assert go_json(text) == encoded
    assert go_json({text: 1}) == "{\n  " + encoded + ": 1\n}"


@pytest.fixture
def zone() -> Iterator[None]:
    saved = os.environ.get("TZ")
    yield
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


def _in_zone(tz: str, unix_ns: int) -> str:
    os.environ["TZ"] = tz
    time.tzset()
    return go_time(unix_ns)


@pytest.mark.usefixtures("zone")
def test_go_time() -> None:
    stamp = 1_795_329_755_175_281_715  # 2026-11-22T06:42:35.175281715Z
    assert _in_zone("UTC", stamp) == "2026-11-22T06:42:35.175281715Z"
    assert _in_zone("UTC", stamp - 281_715) == "2026-11-22T06:42:35.175Z"  # zeros trimmed
    assert _in_zone("UTC", stamp - 175_281_715) == "2026-11-22T06:42:35Z"  # no dot at all
    assert _in_zone("UTC", stamp - 175_281_705) == "2026-11-22T06:42:35.00000001Z"
    assert _in_zone("Asia/Kolkata", stamp) == "2026-11-22T12:12:35.175281715+05:30"
    assert _in_zone("America/New_York", stamp) == "2026-11-22T01:42:35.175281715-05:00"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (3.9, "3s"),
        (62, "1m2s"),
        (3600, "1h0m0s"),
        (3 * 86400 + 5, "3d0h0m5s"),
        (2 * 86400 + 5, "2d0h0m5s"),
        (400 * 86400 + 3661, "1y35d1h1m1s"),
    ],
)
def test_go_uptime(seconds: float, text: str) -> None:
    assert go_uptime(seconds) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", 0),
        ("12", 12),
        ("+12", 12),
        ("-3", -3),
        ("007", 7),
        (" 1", 0),
        ("1 ", 0),
        ("1_000", 0),
        ("1.5", 0),
        ("0x10", 0),
        ("١٢", 0),  # non-ASCII digits
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", 2**63 - 1),  # range error: Atoi's clamped value
        ("-9223372036854775809", -(2**63)),
        ("1" * 5000, 2**63 - 1),
    ],
)
def test_go_atoi(text: str, value: int) -> None:
    assert go_atoi(text) == value
