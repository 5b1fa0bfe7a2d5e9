"""Filter pushdown narrows the read; what it cannot apply exactly goes back to Spark."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

datasource = pytest.importorskip("pyspark.sql.datasource")
if not hasattr(datasource, "EqualTo"):
    pytest.skip("this Spark has no filter pushdown (needs 4.1)", allow_module_level=True)

from pyspark.sql.datasource import (  # noqa: E402
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from stanpkg.pipeline.filters import narrow_options  # noqa: E402
from stanpkg.pipeline.options import ReadOptions  # noqa: E402

BASE = ReadOptions(path="/x")


def test_channel_equality_and_in_are_exact() -> None:
    eq = EqualTo(("channel",), "a")
    within = In(("channel",), ("a", "b"))
    opts, rest = narrow_options(BASE, [eq, within])
    assert rest == [] and opts.only_channels == frozenset({"a"})
    assert opts.wants_channel("a") and not opts.wants_channel("b")


def test_sequence_comparisons_are_exact_and_combined() -> None:
    filters = [
        GreaterThan(("sequence",), 3),
        LessThanOrEqual(("sequence",), 10),
        GreaterThanOrEqual(("sequence",), 2),
        LessThan(("sequence",), 12),
    ]
    opts, rest = narrow_options(BASE, filters)
    assert rest == [] and (opts.from_sequence, opts.to_sequence) == (4, 10)


def test_sequence_in_list_is_bounded_but_left_to_spark() -> None:
    flt = In(("sequence",), (7, 3, 5))
    opts, rest = narrow_options(BASE, [flt])
    assert rest == [flt] and (opts.from_sequence, opts.to_sequence) == (3, 7)


def test_time_filters_prune_but_stay_with_spark() -> None:
    lo = GreaterThanOrEqual(("timestamp_ns",), 1_000)
    hi = LessThan(("timestamp",), datetime(2024, 1, 1, tzinfo=UTC))
    opts, rest = narrow_options(BASE, [lo, hi])
    assert rest == [lo, hi]
    assert opts.from_time_ns == 1_000
    midnight = 1_704_067_200 * 10**9
    assert opts.to_time_ns is not None and midnight <= opts.to_time_ns <= midnight + 2 * 10**9


def test_naive_datetimes_get_a_wide_margin() -> None:
    opts, _ = narrow_options(BASE, [GreaterThan(("timestamp",), datetime(2024, 1, 1))])
    assert opts.from_time_ns is not None
    assert opts.from_time_ns <= 1_704_067_200 * 10**9 + 86_400 * 10**9


def test_other_filters_are_returned_untouched() -> None:
    filters = [IsNotNull(("data",)), StringStartsWith(("subject",), "x"), EqualTo(("slice",), 2)]
    opts, rest = narrow_options(BASE, filters)
    assert rest == filters and opts == BASE
