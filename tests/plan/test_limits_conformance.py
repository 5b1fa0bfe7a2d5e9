"""The store-limits printout against the reference's recorded output.

Each case below is a hand translation of ``<case>.conf`` (and ``<case>.args``) from the
conformance folder into resolver inputs: the configuration compiler is tested elsewhere;
this checks inheritance and rendering, byte for byte, against the reference.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from stanpkg.plan.gotime import parse_duration
from stanpkg.plan.limits import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_CHANNELS,
    PartialLimits,
    render_store_limits,
    resolve_store_limits,
)

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(
    os.environ.get("STANPKG_CONFORMANCE_DIR", ROOT.parent / "shared" / "conformance")
)

K, M, G, T, P, E = (1000**i for i in range(1, 7))  # NATS size suffixes k, m, g, …
KB, MB, GB, TB, PB, EB = (1024**i for i in range(1, 7))  # kb/ki/kib, mb/mi/mib, …

Values = dict[str, int | str]  # limit name -> int, or a duration string

# case -> (global store_limits incl. max_channels, per-channel maps), file then flags.
CASES: dict[str, tuple[Values, dict[str, Values]]] = {
    "limits_defaults": ({}, {}),
    "limits_all_unlimited": (
        {
            "max_channels": 0,
            "max_subs": 0,
            "max_msgs": 0,
            "max_bytes": 0,
            "max_age": "0s",
            "max_inactivity": "0s",
        },
        {},
    ),
    "limits_global_all": (
        {
            "max_channels": 50,
            "max_subs": 20,
            "max_msgs": 5000,
            "max_bytes": 50 * MB,
            "max_age": "48h",
            "max_inactivity": "30m",
        },
        {},
    ),
    "limits_count_aliases": ({"max_msgs": 77, "max_subs": 9}, {}),
    "limits_short_aliases": (
        {
            "max_channels": 5,
            "max_subs": 6,
            "max_msgs": 7,
            "max_bytes": 8 * KB,
            "max_age": "9s",
            "max_inactivity": "10s",
        },
        {},
    ),
    "limits_bytes_rounding": (
        {"max_bytes": 1000},
        {
            "r01": {"max_bytes": 1},
            "r02": {"max_bytes": 1023},
            "r03": {"max_bytes": 1024},
            "r04": {"max_bytes": 1025},
            "r05": {"max_bytes": 1048575},
            "r06": {"max_bytes": 1048576},
            "r07": {"max_bytes": 1000000},
            "r08": {"max_bytes": 1500000},
            "r09": {"max_bytes": 5 * GB},
            "r10": {"max_bytes": 1099511627775},
        },
    ),
    "chan_all_aliases": (
        {},
        {
            "via.channels": {"max_msgs": 1},
            "via.channels_limits": {"max_msgs": 2},
            "via.per_channel": {"max_msgs": 3},
            "via.per_channel_limits": {"max_msgs": 4},
            "via.ChannelsLimits": {"max_msgs": 5},
        },
    ),
    "chan_basic": (
        {"max_msgs": 1000},
        {
            "orders": {"max_msgs": 10, "max_bytes": MB},
            "payments": {"max_age": "24h", "max_subs": 5},
            "events": {"max_inactivity": "1h"},
            "quiet.a": {},
            "quiet.b": {},
            "quiet.c": {},
        },
    ),
    "chan_middle_wildcard": (
        {},
        {
            "foo.>": {"max_msgs": 20},
            "foo.*.bar": {"max_msgs": 3},
            "foo.baz.bar": {"max_bytes": KB},
        },
    ),
    "chan_negative_is_unlimited": (
        {"max_msgs": 100, "max_age": "1h"},
        {
            "neg": {
                "max_msgs": -5,
                "max_bytes": -1,
                "max_age": "-1h",
                "max_subs": -2,
                "max_inactivity": "-1s",
            }
        },
    ),
    "chan_same_as_parent": (
        {"max_msgs": 100},
        {
            "same.>": {"max_msgs": 100, "max_subs": 1000},
            "same.child": {"max_msgs": 100, "max_bytes": 1000000 * KB},
            "diff": {"max_msgs": 101},
        },
    ),
    "chan_sibling_order": (
        {},
        {
            "zeta": {"max_msgs": 1},
            "alpha": {"max_msgs": 2},
            "Beta": {"max_msgs": 3},
            "10": {"max_msgs": 4},
            "_x": {"max_msgs": 5},
            "alpha.two": {"max_msgs": 6},
            "alpha.one": {"max_msgs": 7},
            "alpha.>": {"max_subs": 8},
            "alpha.*": {"max_subs": 9},
        },
    ),
    "chan_space_in_name": ({}, {"foo bar": {"max_msgs": 3}}),
    "chan_wildcard_inheritance": (
        {
            "max_msgs": 100,
            "max_bytes": 10 * MB,
            "max_age": "1h",
            "max_subs": 10,
            "max_inactivity": "10m",
        },
        {
            ">": {"max_msgs": 50},
            "foo.>": {"max_bytes": MB, "max_age": "30m"},
            "foo.bar.>": {"max_msgs": 0, "max_subs": 5},
            "foo.bar.baz": {"max_inactivity": "1m"},
            "foo.*": {"max_subs": 10},
            "*.bar": {},
            "foo.bar": {"max_msgs": 50},
            "other": {"max_msgs": 100, "max_bytes": 0},
            "a.b.c.d.e": {"max_age": "0"},
        },
    ),
    "chan_zero_means_unlimited": (
        {
            "max_subs": 10,
            "max_msgs": 100,
            "max_bytes": MB,
            "max_age": "1h",
            "max_inactivity": "1h",
        },
        {
            "all.zero": {
                "max_subs": 0,
                "max_msgs": 0,
                "max_bytes": 0,
                "max_age": "0s",
                "max_inactivity": "0s",
            }
        },
    ),
    "syntax_duration_quoted_forms": (
        {},
        {
            "d01": {"max_age": "1h30m"},
            "d02": {"max_age": "1.5h"},
            "d03": {"max_age": "90s"},
            "d04": {"max_age": "500ms"},
            "d05": {"max_age": "0.5s"},
            "d06": {"max_age": "3600000ms"},
            "d07": {"max_age": "1500ns"},
            "d08": {"max_age": "1us"},
            "d09": {"max_age": "72h"},
            "d10": {"max_inactivity": "2h0m30s"},
            "d11": {"max_inactivity": "1m0.25s"},
        },
    ),
    "syntax_duration_unquoted_ok": (
        {"max_age": "1h30m", "max_inactivity": "45s"},
        {"unquoted": {"max_age": "2h"}},
    ),
    "syntax_size_binary_suffixes": (
        {},
        {
            "b01": {"max_bytes": 10 * KB},
            "b02": {"max_bytes": 10 * KB},
            "b03": {"max_bytes": 10 * KB},
            "b04": {"max_bytes": 10 * KB},
            "b05": {"max_bytes": 2 * MB},
            "b06": {"max_bytes": 2 * MB},
            "b07": {"max_bytes": 2 * MB},
            "b08": {"max_bytes": 3 * GB},
            "b09": {"max_bytes": 3 * GB},
            "b10": {"max_bytes": TB},
            "b11": {"max_bytes": PB},
            "b12": {"max_bytes": EB},
        },
    ),
    "syntax_size_decimal_suffixes": (
        {},
        {
            "s01": {"max_bytes": 10 * K},
            "s02": {"max_bytes": 10 * K},
            "s03": {"max_bytes": 2 * M},
            "s04": {"max_bytes": 2 * M},
            "s05": {"max_bytes": 3 * G},
            "s06": {"max_bytes": 3 * G},
            "s07": {"max_bytes": T},
            "s08": {"max_bytes": T},
            "s09": {"max_bytes": P},
            "s10": {"max_bytes": E},
        },
    ),
    "syntax_case_insensitive_keys": ({"max_msgs": 11}, {"Foo": {"max_msgs": 2}}),
    "syntax_quoted_keys": (
        {"max_msgs": 100},
        {
            "with.dots": {"max_msgs": 5},
            "single.quoted": {"max_subs": 3},
            "plain.unquoted": {"max_bytes": KB},
        },
    ),
    "syntax_comments": ({"max_msgs": 42}, {"news.>": {"max_age": "1h"}}),
    "syntax_separators_mixed": (
        {"max_msgs": 500, "max_subs": 20, "max_channels": 30, "max_age": "1h"},
        {
            "orders": {"max_msgs": 10},
            "audit.>": {"max_bytes": 64 * KB},
            "logs": {"max_subs": 3, "max_msgs": 4},
        },
    ),
    "syntax_top_level_options": ({"max_msgs": 1234}, {"top.>": {"max_subs": 2}}),
    "err_unknown_keys_ignored": ({"max_msgs": 12}, {"u": {"max_subs": 2}}),
    # Command-line flags (the .args files) override the file.
    "cli_mm_overrides_file": ({"max_msgs": 50, "max_subs": 5}, {}),
    "cli_all_limit_flags": (
        {
            "max_channels": 0,
            "max_subs": 0,
            "max_msgs": 50,
            "max_bytes": MB,
            "max_age": "1h30m",
            "max_inactivity": "10m",
        },
        {},
    ),
    "cli_with_channel_inheritance": (
        {"max_msgs": 300, "max_bytes": 2 * MB},
        {"inherit": {"max_subs": 4}, "inherit.>": {"max_msgs": 0}},
    ),
}


def _ints(values: Values) -> dict[str, int]:
    return {k: parse_duration(v) if isinstance(v, str) else v for k, v in values.items()}


def render_case(case: str) -> list[str]:
    globals_, channels = CASES[case]
    limits = _ints(globals_)
    max_channels = limits.pop("max_channels", DEFAULT_MAX_CHANNELS)
    per_channel = {name: PartialLimits(**_ints(v)) for name, v in channels.items()}
    sl = resolve_store_limits(max_channels, replace(DEFAULT_LIMITS, **limits), per_channel)
    return render_store_limits(sl)


def expected_block(case: str) -> list[str]:
    """The recorded store-limits block of a running case, without ``STREAM: ``."""
    lines = (CONFORMANCE / f"{case}.expected").read_text(encoding="utf-8").splitlines()
    assert "status: running" in lines, f"{case} is not a running case"
    start = lines.index("STREAM: ---------- Store Limits ----------")
    end = next(i for i in range(start + 1, len(lines)) if re.fullmatch(r"STREAM: -+", lines[i]))
    return [line.removeprefix("STREAM: ") for line in lines[start : end + 1]]


needs_conformance = pytest.mark.skipif(
    not CONFORMANCE.is_dir(), reason=f"no conformance folder at {CONFORMANCE}"
)


@needs_conformance
@pytest.mark.parametrize("case", sorted(CASES))
def test_printout_matches_reference(case: str) -> None:
    assert render_case(case) == expected_block(case)


@needs_conformance
def test_translated_cases_exist() -> None:
    missing = [c for c in CASES if not (CONFORMANCE / f"{c}.expected").is_file()]
    assert not missing
