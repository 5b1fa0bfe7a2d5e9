"""Value rendering of the store-limits printout (defaults.md §8.4)."""

from __future__ import annotations

import pytest

from stanpkg.plan.units import LimitKind, friendly_bytes, render_limit_value

KIB, MIB, GIB, TIB, PIB, EIB = (1024**i for i in range(1, 7))

FRIENDLY = [
    (0, "0 B"),
    (1, "1 B"),
    (512, "512 B"),
    (1000, "1000 B"),
    (1023, "1023 B"),
    (1024, "1.00 KB"),
    (1025, "1.00 KB"),
    (1536, "1.50 KB"),
    (10 * KIB, "10.00 KB"),
    (10_000, "9.77 KB"),
    (1_000_000, "976.56 KB"),
    (1_048_575, "1024.00 KB"),  # log says KB, the quotient rounds up: the reference's artefact
    (MIB, "1.00 MB"),
    (1_500_000, "1.43 MB"),
    (10_485_760, "10.00 MB"),
    (1_024_000_000, "976.56 MB"),
    (2_000_000_000, "1.86 GB"),
    (5 * GIB, "5.00 GB"),
    (TIB - 1, "1024.00 GB"),
    (TIB, "1.00 TB"),
    (10**12, "931.32 GB"),
    (10**15, "909.49 TB"),
    (PIB, "1.00 PB"),
    (10**18, "888.18 PB"),
    (EIB, "1.00 EB"),
    (EIB - 1, "1.00 EB"),  # float64(2**60 - 1) == 2**60
    ((1 << 63) - 1, "8.00 EB"),
    # Negative values never reach the printout after validation; Go prints %v of a float64.
    (-5, "-5 B"),
    (-1024, "-1024 B"),
    (-123_456, "-123456 B"),
    (-1_000_000, "-1e+06 B"),
    (-1_234_567, "-1.234567e+06 B"),
    # Beyond int64 (no reference behaviour): still EB, no float overflow.
    (1 << 63, "8.00 EB"),
    (10**30, "867361737988.40 EB"),
]


@pytest.mark.parametrize(("n", "text"), FRIENDLY)
def test_friendly_bytes(n: int, text: str) -> None:
    assert friendly_bytes(n) == text


RENDER: list[tuple[int, LimitKind, str]] = [
    (0, "count", "unlimited"),
    (0, "bytes", "unlimited"),
    (0, "duration", "unlimited"),
    (1000, "count", "1000"),
    (-5, "count", "-5"),
    (1000, "bytes", "1000 B"),
    (1_024_000_000, "bytes", "976.56 MB"),
    (90 * 60 * 10**9, "duration", "1h30m0s"),
    (-(10**9), "duration", "-1s"),
    (1500, "duration", "1.5\u00b5s"),
]


@pytest.mark.parametrize(("value", "kind", "text"), RENDER)
def test_render_limit_value(value: int, kind: LimitKind, text: str) -> None:
    assert render_limit_value(value, kind) == text
