"""Spark filter pushdown: narrowing a read with the query's WHERE clause.

Only conjunctions reach a data source (Spark splits ``AND``), so every filter understood
here only narrows: channel and sequence filters are applied exactly and removed from
Spark's work; time filters prune slices and are still evaluated by Spark (a pushed
datetime's time zone is Spark's business, so no exactness is claimed for them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

from stanpkg.pipeline.options import ReadOptions

__all__ = ["narrow_options"]

_SECOND_NS = 1_000_000_000
_Range = tuple[int | None, int | None]  # inclusive bounds; None: open on that side


def narrow_options(
    options: ReadOptions, filters: Sequence[Filter]
) -> tuple[ReadOptions, list[Filter]]:
    """Options narrowed by ``filters``, and the filters Spark must still evaluate."""
    remaining: list[Filter] = []
    for flt in filters:
        attribute: tuple[str, ...] = getattr(flt, "attribute", ())
        column = attribute[0] if len(attribute) == 1 else ""
        exact = False
        if column == "channel":
            narrowed = _channel(options, flt)
            exact = narrowed is not None
        elif column == "sequence":
            narrowed = _sequence(options, flt)
            # An IN list is only bounded here: the values between min and max are Spark's.
            exact = narrowed is not None and not isinstance(flt, In)
        elif column in ("timestamp", "timestamp_ns"):
            narrowed = _time(options, flt, column)  # pruning only: Spark keeps it
        else:
            narrowed = None
        if narrowed is not None:
            options = narrowed
        if not exact:
            remaining.append(flt)
    return options, remaining


def _channel(options: ReadOptions, flt: Filter) -> ReadOptions | None:
    if isinstance(flt, EqualTo) and isinstance(flt.value, str):
        names: Iterable[Any] = (flt.value,)
    elif isinstance(flt, In) and all(isinstance(v, str) for v in flt.value):
        names = flt.value
    else:
        return None
    wanted = frozenset(names)
    if options.only_channels is not None:
        wanted &= options.only_channels
    return replace(options, only_channels=wanted)


def _bounds(flt: Filter) -> _Range | None:
    """Inclusive integer bounds expressed by a comparison filter, if it is one."""
    value = getattr(flt, "value", None)
    if isinstance(flt, In):
        values = [v for v in flt.value if isinstance(v, int) and not isinstance(v, bool)]
        if len(values) != len(flt.value) or not values:
            return None
        return min(values), max(values)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if isinstance(flt, EqualTo):
        return value, value
    if isinstance(flt, GreaterThan):
        return value + 1, None
    if isinstance(flt, GreaterThanOrEqual):
        return value, None
    if isinstance(flt, LessThan):
        return None, value - 1
    if isinstance(flt, LessThanOrEqual):
        return None, value
    return None


def _sequence(options: ReadOptions, flt: Filter) -> ReadOptions | None:
    bounds = _bounds(flt)
    if bounds is None:
        return None
    first, last = _intersect(bounds, (options.from_sequence, options.to_sequence))
    return replace(options, from_sequence=first, to_sequence=last)


def _time(options: ReadOptions, flt: Filter, column: str) -> ReadOptions | None:
    if column == "timestamp":
        value = getattr(flt, "value", None)
        if not isinstance(value, datetime):
            return None
        # Pruning only, so widen the bounds to stay clear of rounding doubts, and of time
        # zone doubts (a day) when the value carries no zone.
        ns = _datetime_ns(value)
        flt = type(flt)(getattr(flt, "attribute", ()), ns)  # type: ignore[call-arg]
        slack = _SECOND_NS if value.tzinfo is not None else 86_400 * _SECOND_NS
    else:
        slack = 0
    bounds = _bounds(flt)
    if bounds is None:
        return None
    lo, hi = bounds
    widened = (None if lo is None else lo - slack, None if hi is None else hi + slack)
    first, last = _intersect(widened, (options.from_time_ns, options.to_time_ns))
    return replace(options, from_time_ns=first, to_time_ns=last)


def _intersect(bounds: _Range, current: _Range) -> _Range:
    lo, hi = bounds
    first, last = current
    if lo is not None:
        first = lo if first is None else max(lo, first)
    if hi is not None:
        last = hi if last is None else min(hi, last)
    return first, last


def _datetime_ns(value: datetime) -> int:
    moment = value if value.tzinfo is not None else value.astimezone()  # naive = local
    delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * _SECOND_NS + delta.microseconds * 1000
