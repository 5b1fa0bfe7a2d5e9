"""Inheritance and printout of store limits (defaults.md §2.2, §8)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from stanpkg.plan.gotime import HOUR, MINUTE, SECOND
from stanpkg.plan.limits import (
    DEFAULT_LIMITS,
    ChannelLimits,
    Limits,
    PartialLimits,
    StoreLimits,
    render_store_limits,
    resolve_store_limits,
)
from stanpkg.plan.subjects import SubjectTree, is_literal, is_valid_channel_name

P = PartialLimits
MB = 1024 * 1024


def lines(text: str) -> list[str]:
    return text.strip("\n").split("\n")


# --- defaults.md §8.5, verbatim --------------------------------------------------------

SPEC_FIRST = """
---------- Store Limits ----------
Channels:                   50
--------- Channels Limits --------
  Subscriptions:          1000 *
  Messages     :          1000
  Bytes        :      10.00 MB
  Age          :       1h30m0s
  Inactivity   :     unlimited *
--------- List of Channels ---------
>
 |-> Messages                     10
 bar
  |-> Subscriptions               30
 baz
  |-> Messages             unlimited
 foo.>
  |-> Bytes                  1.00 KB
  |-> Inactivity                  5s
  foo.bar.>
   |-> Age                        1s
   foo.bar.baz.>
    |-> Subscriptions             20
------------------------------------
"""


def test_spec_first_example() -> None:
    sl = resolve_store_limits(
        50,
        Limits(1000, 1000, 10 * MB, 90 * MINUTE, 0),
        {
            ">": P(max_msgs=10),
            "foo.>": P(max_bytes=1024, max_inactivity=5 * SECOND),
            "foo.bar.>": P(max_age=SECOND),
            "foo.bar.baz.>": P(max_subs=20),
            "bar": P(max_subs=30),
            "baz": P(max_msgs=0),
        },
    )
    assert render_store_limits(sl) == lines(SPEC_FIRST)


SPEC_SECOND = """
---------- Store Limits ----------
Channels:            unlimited
--------- Channels Limits --------
  Subscriptions:     unlimited
  Messages     :     unlimited
  Bytes        :     unlimited
  Age          :     unlimited *
  Inactivity   :         10m0s
-------- List of Channels --------
*.b
 |-> Age                     1m30s
a.*
  a.b
   |-> Bytes                 512 B
----------------------------------
"""


def test_spec_second_example() -> None:
    sl = resolve_store_limits(
        0,
        Limits(0, 0, 0, 0, 10 * MINUTE),
        {"a.*": P(max_msgs=0), "a.b": P(max_bytes=512), "*.b": P(max_age=90 * SECOND)},
    )
    assert render_store_limits(sl) == lines(SPEC_SECOND)
    a_b = next(c for c in sl.channels if c.name == "a.b")
    assert a_b.level == 2
    assert a_b.limits.max_age == 0  # from a.*, not from *.b
    assert a_b.parent == next(c for c in sl.channels if c.name == "a.*").limits


SPEC_DEEP = """
---------- List of Channels ----------
>
 |-> Messages                     5
 *.>
  |-> Messages                    6
  *.*
   |-> Messages                   7
   *.bar
    |-> Bytes                 100 B
   bar.baz
   foo.>
    |-> Age                    1m0s
    foo.*
     |-> Subscriptions             3
   foo.*.>
    |-> Messages                  9
      foo.bar
       |-> Inactivity           1h0m0s
    foo.bar.>
     |-> Messages                 11
--------------------------------------
"""

DEEP = {
    ">": P(max_msgs=5),
    "*.>": P(max_msgs=6),
    "*.*": P(max_msgs=7),
    "*.bar": P(max_bytes=100),
    "foo.>": P(max_age=MINUTE),
    "foo.*": P(max_subs=3),
    "foo.bar": P(max_inactivity=HOUR),
    "bar.baz": P(),
    "foo.*.>": P(max_msgs=9),
    "foo.bar.>": P(max_msgs=11),
}


def test_spec_deep_wildcard_example() -> None:
    sl = resolve_store_limits(100, DEFAULT_LIMITS, DEEP)
    assert render_store_limits(sl)[8:] == lines(SPEC_DEEP)
    by_name = {c.name: c for c in sl.channels}
    assert by_name[">"].level == 0 and by_name[">"].parent == DEFAULT_LIMITS
    assert by_name["foo.>"].level == 3 and by_name["foo.>"].parent == by_name["*.*"].limits


SPEC_DEFAULTS = """
---------- Store Limits ----------
Channels:                  100 *
--------- Channels Limits --------
  Subscriptions:          1000 *
  Messages     :       1000000 *
  Bytes        :     976.56 MB *
  Age          :     unlimited *
  Inactivity   :     unlimited *
----------------------------------
"""


def test_spec_defaults_only() -> None:
    sl = resolve_store_limits(100, DEFAULT_LIMITS, {})
    assert render_store_limits(sl) == lines(SPEC_DEFAULTS)
    assert sl.channels == ()


# --- semantics ---------------------------------------------------------------------------


def test_absent_inherits_zero_and_negative_mean_unlimited() -> None:
    globals_ = Limits(10, 20, 30, 40, 50)
    sl = resolve_store_limits(
        100, globals_, {"c": P(max_subs=None, max_msgs=0, max_bytes=-7, max_age=5)}
    )
    (c,) = sl.channels
    assert c == ChannelLimits("c", Limits(10, 0, 0, 5, 50), 0, globals_)


def test_inheritance_chain_and_levels() -> None:
    sl = resolve_store_limits(
        100,
        DEFAULT_LIMITS,
        {"foo.bar.>": P(max_age=1), "foo.>": P(max_msgs=2), ">": P(max_subs=3)},
    )
    assert [(c.name, c.level) for c in sl.channels] == [(">", 0), ("foo.>", 1), ("foo.bar.>", 2)]
    assert sl.channels[2].limits == replace(DEFAULT_LIMITS, max_subs=3, max_msgs=2, max_age=1)
    assert sl.channels[2].parent == sl.channels[1].limits


def test_star_entry_after_its_gt_sibling_inherits_from_it() -> None:
    # match list of "foo.>" is [foo.>, foo.*]: foo.* is the parent's child, not the reverse
    sl = resolve_store_limits(100, DEFAULT_LIMITS, {"foo.*": P(), "foo.>": P(max_msgs=4)})
    assert [(c.name, c.level) for c in sl.channels] == [("foo.>", 0), ("foo.*", 1)]
    assert sl.channels[1].limits.max_msgs == 4


def test_for_channel_uses_the_narrowest_entry() -> None:
    sl = resolve_store_limits(100, DEFAULT_LIMITS, DEEP)
    by_name = {c.name: c.limits for c in sl.channels}
    assert sl.for_channel("foo.bar") == by_name["foo.bar"]
    assert sl.for_channel("foo.qux") == by_name["foo.*"]
    assert sl.for_channel("foo.qux.x.y") == by_name["foo.*.>"]
    assert sl.for_channel("zzz") == by_name[">"]
    assert resolve_store_limits(100, DEFAULT_LIMITS, {"a": P()}).for_channel("b") == DEFAULT_LIMITS


def test_store_limits_built_by_hand_also_looks_up() -> None:
    own = Limits(1, 2, 3, 4, 5)
    sl = StoreLimits(100, DEFAULT_LIMITS, (ChannelLimits("a.*", own, 0, DEFAULT_LIMITS),))
    assert sl.for_channel("a.b") == own
    assert sl.for_channel("a") == DEFAULT_LIMITS


def test_width_counts_utf8_bytes() -> None:
    name = "é" * 20  # 20 characters, 40 bytes
    out = render_store_limits(resolve_store_limits(100, DEFAULT_LIMITS, {name: P()}))
    assert out[8:] == ["-" * 11 + " List of Channels " + "-" * 11, name, "-" * 40]


def test_micro_sign_widens_by_two_bytes() -> None:
    # 34 characters, but "µ" is 2 bytes in Go's len(): the frame is 35 wide
    out = render_store_limits(resolve_store_limits(100, DEFAULT_LIMITS, {"c.d": P(max_age=1500)}))
    assert out[9:] == ["c.d", " |-> Age             " + "        1.5µs", "-" * 35]
    assert out[8] == "-------- List of Channels ---------"


def test_wide_global_values_are_not_truncated_nor_widen_the_frame() -> None:
    out = render_store_limits(
        resolve_store_limits(10**20, replace(DEFAULT_LIMITS, max_msgs=-1), {})
    )
    assert out[1] == "Channels:        100000000000000000000"
    assert out[4] == "  Messages     :            -1"
    assert out[-1] == "-" * 34


# --- properties --------------------------------------------------------------------------

_PART = st.one_of(st.none(), st.integers(-3, 3), st.integers(-(2**70), 2**70))
_PARTIAL = st.builds(PartialLimits, _PART, _PART, _PART, _PART, _PART)
_ANY_INT = st.integers(-(2**70), 2**70)
_LIMITS = st.builds(Limits, _ANY_INT, _ANY_INT, _ANY_INT, _ANY_INT, _ANY_INT)


@given(_ANY_INT, _LIMITS, st.dictionaries(st.text(max_size=10), _PARTIAL, max_size=15))
def test_resolve_and_render_are_total(
    max_channels: int, defaults: Limits, per_channel: dict[str, PartialLimits]
) -> None:
    sl = resolve_store_limits(max_channels, defaults, per_channel)
    assert sorted(c.name for c in sl.channels) == sorted(per_channel)
    out = render_store_limits(sl)
    assert out[0] == "---------- Store Limits ----------"
    assert set(out[-1]) == {"-"}
    for name in per_channel:
        sl.for_channel(name)


def go_apply_inheritance(
    defaults: Limits, per_channel: dict[str, PartialLimits]
) -> dict[str, Limits]:
    """The reference's StoreLimits.applyInheritance loop, transcribed: for each name in
    walk order, resolve every unprocessed entry of its match list from its predecessor."""
    tree: SubjectTree[str] = SubjectTree()
    for name in per_channel:
        tree.insert(name, name)
    done: dict[str, Limits] = {}

    def inherit(name: str, parent: Limits) -> None:
        own = per_channel[name]
        done[name] = Limits(
            *(
                getattr(parent, f) if getattr(own, f) is None else max(getattr(own, f), 0)
                for f in ("max_subs", "max_msgs", "max_bytes", "max_age", "max_inactivity")
            )
        )

    for name, _ in tree.walk():
        matches = tree.match_list(name)
        if is_literal(matches[0]) and matches[0] in done:
            continue
        if matches[0] not in done:
            inherit(matches[0], defaults)
        for prev, current in pairwise(matches):
            if current not in done:
                inherit(current, done[prev])
    return done


_VALID_NAME = (
    st.lists(st.sampled_from(["a", "b", "*"]), min_size=0, max_size=3)
    .flatmap(lambda toks: st.sampled_from([toks, [*toks, ">"]]))
    .map(".".join)
    .filter(lambda n: is_valid_channel_name(n, allow_wildcards=True))
)


@given(st.dictionaries(_VALID_NAME, _PARTIAL, max_size=12))
def test_resolution_matches_the_reference_algorithm(per_channel: dict[str, PartialLimits]) -> None:
    defaults = Limits(1, 2, 3, 4, 5)
    sl = resolve_store_limits(100, defaults, per_channel)
    assert {c.name: c.limits for c in sl.channels} == go_apply_inheritance(defaults, per_channel)
