"""Go time.ParseDuration / Duration.String() compatibility."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stanpkg.plan.gotime import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    SECOND,
    DurationError,
    format_duration,
    parse_duration,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

PARSE_OK = [
    ("0", 0),
    ("+0", 0),
    ("-0", 0),
    ("5s", 5 * SECOND),
    ("30s", 30 * SECOND),
    ("1478s", 1478 * SECOND),
    ("-5s", -5 * SECOND),
    ("+5s", 5 * SECOND),
    ("-0s", 0),
    ("+0s", 0),
    ("0s", 0),
    ("5.0s", 5 * SECOND),
    ("5.6s", 5 * SECOND + 600 * MILLISECOND),
    ("5.s", 5 * SECOND),
    (".5s", 500 * MILLISECOND),
    ("1.0s", SECOND),
    ("1.00s", SECOND),
    ("1.004s", SECOND + 4 * MILLISECOND),
    ("1.0040s", SECOND + 4 * MILLISECOND),
    ("100.00100s", 100 * SECOND + 1 * MILLISECOND),
    ("10ns", 10),
    ("11us", 11 * MICROSECOND),
    ("12\u00b5s", 12 * MICROSECOND),  # micro sign
    ("12\u03bcs", 12 * MICROSECOND),  # Greek mu
    ("13ms", 13 * MILLISECOND),
    ("14s", 14 * SECOND),
    ("15m", 15 * MINUTE),
    ("16h", 16 * HOUR),
    ("3h30m", 3 * HOUR + 30 * MINUTE),
    ("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
    ("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
    ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6),
    ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND),
    ("52763797000ns", 52763797000),
    ("0.3333333333333333333h", 20 * MINUTE),  # fractions are float64, truncated
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", INT64_MAX),
    ("9223372036854775.807us", INT64_MAX),
    ("9223372036s854ms775us807ns", INT64_MAX),
    ("-9223372036854775808ns", INT64_MIN),
    ("-9223372036854775.808us", INT64_MIN),
    ("-9223372036s854ms775us808ns", INT64_MIN),
    ("-2562047h47m16.854775808s", INT64_MIN),
    ("0.100000000000000000000h", 6 * MINUTE),
    ("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372539827),
    ("1h30m", 90 * MINUTE),
    ("1.5h", 90 * MINUTE),
    ("3600000ms", HOUR),
    ("1500ns", 1500),
    ("2h0m30s", 2 * HOUR + 30 * SECOND),
    # Go sums in uint64: 2**63 + 2**63 wraps to 0 before its overflow check.
    ("9223372036854775808ns9223372036854775808ns", 0),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_OK)
def test_parse_duration(text: str, expected: int) -> None:
    assert parse_duration(text) == expected


PARSE_ERRORS = [
    ("", 'time: invalid duration ""'),
    ("3", 'time: missing unit in duration "3"'),
    ("00", 'time: missing unit in duration "00"'),
    ("-", 'time: invalid duration "-"'),
    ("s", 'time: invalid duration "s"'),
    (".", 'time: invalid duration "."'),
    ("-.", 'time: invalid duration "-."'),
    (".s", 'time: invalid duration ".s"'),
    ("+.s", 'time: invalid duration "+.s"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("1.5x3s", 'time: unknown unit "x" in duration "1.5x3s"'),
    ("1 s", 'time: unknown unit " s" in duration "1 s"'),
    ("1s ", 'time: unknown unit "s " in duration "1s "'),
    (" 1s", 'time: invalid duration " 1s"'),
    ("1h30", 'time: missing unit in duration "1h30"'),
    ("1\u00b5", 'time: unknown unit "\\xc2\\xb5" in duration "1\\xc2\\xb5"'),
    ("1\u00e9", 'time: unknown unit "\\xc3\\xa9" in duration "1\\xc3\\xa9"'),
    ('1"', 'time: unknown unit "\\"" in duration "1\\""'),
    ("1\\", 'time: unknown unit "\\\\" in duration "1\\\\"'),
    ("\t1s", 'time: invalid duration "\\x091s"'),
    ("1s\x00", 'time: unknown unit "s\\x00" in duration "1s\\x00"'),
    ("--1s", 'time: invalid duration "--1s"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
    ("9223372036854ms775us808ns", 'time: invalid duration "9223372036854ms775us808ns"'),
    ("9223372036s854ms775us808ns", 'time: invalid duration "9223372036s854ms775us808ns"'),
    ("9223372036854s", 'time: invalid duration "9223372036854s"'),
    ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
    ("99999999999999999999ns", 'time: invalid duration "99999999999999999999ns"'),
    ("2562048h", 'time: invalid duration "2562048h"'),
]


@pytest.mark.parametrize(("text", "message"), PARSE_ERRORS)
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


FORMAT = [
    (0, "0s"),
    (1, "1ns"),
    (999, "999ns"),
    (1000, "1\u00b5s"),
    (1100, "1.1\u00b5s"),
    (1500, "1.5\u00b5s"),
    (1_500_000, "1.5ms"),
    (2_200_000, "2.2ms"),
    (100 * MILLISECOND, "100ms"),
    (999_999_999, "999.999999ms"),
    (1_500 * MILLISECOND, "1.5s"),
    (3_300 * MILLISECOND, "3.3s"),
    (10 * SECOND, "10s"),
    (MINUTE, "1m0s"),
    (90 * SECOND, "1m30s"),
    (4 * MINUTE + 5 * SECOND, "4m5s"),
    (4 * MINUTE + 5001 * MILLISECOND, "4m5.001s"),
    (5 * HOUR + 6 * MINUTE + 7001 * MILLISECOND, "5h6m7.001s"),
    (8 * MINUTE + 1, "8m0.000000001s"),
    (HOUR, "1h0m0s"),
    (90 * MINUTE, "1h30m0s"),
    (24 * HOUR, "24h0m0s"),
    (36 * HOUR + 1, "36h0m0.000000001s"),
    (INT64_MAX, "2562047h47m16.854775807s"),
    (INT64_MIN, "-2562047h47m16.854775808s"),
    (-SECOND, "-1s"),
    (-1, "-1ns"),
    (-1500, "-1.5\u00b5s"),
    (-90 * MINUTE, "-1h30m0s"),
    (1 << 64, "5124095h34m33.709551616s"),  # beyond int64: hours keep growing
]


@pytest.mark.parametrize(("ns", "text"), FORMAT)
def test_format_duration(ns: int, text: str) -> None:
    assert format_duration(ns) == text


def test_micro_sign_is_u00b5() -> None:
    assert format_duration(1500).encode() == b"1.5\xc2\xb5s"


@given(st.integers(INT64_MIN, INT64_MAX))
def test_format_parse_round_trip(ns: int) -> None:
    text = format_duration(ns)
    assert format_duration(parse_duration(text)) == text
    assert parse_duration(text) == ns  # Go's own output parses back exactly


@given(st.text(alphabet="0123456789.+-hmsnuµμ x", max_size=12))
def test_parse_never_raises_anything_else(text: str) -> None:
    try:
        value = parse_duration(text)
    except DurationError as err:
        assert str(err).startswith("time: ")
    else:
        assert INT64_MIN <= value <= INT64_MAX
