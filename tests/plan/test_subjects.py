"""Channel name rules and the sublist tree (defaults.md §2.2, §8.2, §8.3)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stanpkg.plan.subjects import (
    SubjectTree,
    channel_name_problem,
    is_literal,
    is_valid_channel_name,
)

# (name, valid with wildcards allowed, valid without)
VALIDITY = [
    ("foo", True, True),
    ("foo.bar", True, True),
    ("foo-bar_baz.1", True, True),
    ("ünïcødé.名前", True, True),
    ("foo bar", True, True),  # the reference accepts spaces (chan_space_in_name)
    ("*", True, False),
    (">", True, False),
    ("a.*", True, False),
    ("a.>", True, False),
    ("*.*.>", True, False),
    ("foo.*.bar", True, False),
    ("", False, False),
    (".", False, False),
    (".foo", False, False),
    ("foo.", False, False),
    ("foo..bar", False, False),
    ("foo/bar", False, False),  # the reference's file store uses names as directories
    ("foo.>.bar", False, False),
    (">.a", False, False),
    ("a.>.>", False, False),
    ("foo.*bar", False, False),
    ("foo*", False, False),
    ("f>o", False, False),
    ("**", False, False),
]


@pytest.mark.parametrize(("name", "with_wildcards", "literal_only"), VALIDITY)
def test_reference_validity(name: str, with_wildcards: bool, literal_only: bool) -> None:
    assert is_valid_channel_name(name, allow_wildcards=True) is with_wildcards
    assert is_valid_channel_name(name, allow_wildcards=False) is literal_only


@pytest.mark.parametrize(
    "name", ["foo bar", "foo\tbar", "foo\nbar", "foo\x00", "foo\x7f", "a\u00a0b", "a\u2028b"]
)
def test_stanpkg_rejects_what_the_reference_accepts(name: str) -> None:
    assert is_valid_channel_name(name, allow_wildcards=True)
    problem = channel_name_problem(name, allow_wildcards=True)
    assert problem is not None
    assert problem.reference_accepts
    assert "whitespace or a control character" in problem.message


def test_unpaired_surrogate_is_rejected_by_stanpkg_only() -> None:
    problem = channel_name_problem("a\ud800", allow_wildcards=False)
    assert problem is not None and problem.reference_accepts


def test_problem_for_reference_invalid_names() -> None:
    for name in ("foo..bar", "foo.>.bar", "", "a/b", "foo.*bar"):
        problem = channel_name_problem(name, allow_wildcards=True)
        assert problem is not None and not problem.reference_accepts, name
    problem = channel_name_problem("a.*", allow_wildcards=False)
    assert problem is not None and "wildcards" in problem.message


def test_valid_names_have_no_problem() -> None:
    for name in ("foo", "a.*.>", "ünï.cødé"):
        assert channel_name_problem(name, allow_wildcards=True) is None


def test_is_literal() -> None:
    assert is_literal("foo.bar")
    assert not is_literal("foo.*")
    assert not is_literal(">")


def tree_of(*names: str) -> SubjectTree[str]:
    tree: SubjectTree[str] = SubjectTree()
    for name in names:
        tree.insert(name, name)
    return tree


SPEC_82 = (">", "*.>", "*.*", "*.bar", "foo.>", "foo.*", "foo.bar")


@pytest.mark.parametrize(
    ("names", "query", "expected"),
    [
        # §8.2 worked example (insertion order must not matter)
        (SPEC_82, "foo.bar", list(SPEC_82)),
        (tuple(reversed(SPEC_82)), "foo.bar", list(SPEC_82)),
        # §2.2: a.b inherits from a.*, not *.b
        (("a.b", "a.*", "*.b"), "a.b", ["*.b", "a.*", "a.b"]),
        ((">", "foo.>", "foo.bar.>"), "foo.bar.>", [">", "foo.>", "foo.bar.>"]),
        # §8.5 deep example: '>' in the query is a literal token that '*' matches
        (
            (*SPEC_82, "bar.baz", "foo.*.>", "foo.bar.>"),
            "foo.>",
            [">", "*.>", "*.*", "foo.>", "foo.*"],
        ),
        (
            (*SPEC_82, "bar.baz", "foo.*.>", "foo.bar.>"),
            "foo.*",
            [">", "*.>", "*.*", "foo.>", "foo.*"],
        ),
        (
            ("foo.>", "foo.*.bar", "foo.baz.bar"),
            "foo.baz.bar",
            ["foo.>", "foo.*.bar", "foo.baz.bar"],
        ),
        (("foo", "foo.bar"), "foo.bar.baz", []),
        (("foo.bar",), "foo", []),
        ((">",), "a.b.c.d", [">"]),
        (("*",), "a.b", []),
        (("a.>",), "a", []),  # '>' needs at least one token
    ],
)
def test_match_list(names: tuple[str, ...], query: str, expected: list[str]) -> None:
    assert tree_of(*names).match_list(query) == expected


def test_walk_order_spec_83() -> None:
    names = (
        "foo.bar.>",
        "bar.baz",
        "foo.*.>",
        "foo.bar",
        "foo.*",
        "foo.>",
        "*.bar",
        "*.*",
        "*.>",
        ">",
    )
    assert [name for name, _ in tree_of(*names).walk()] == [
        ">",
        "*.>",
        "*.*",
        "*.bar",
        "bar.baz",
        "foo.>",
        "foo.*",
        "foo.*.>",
        "foo.bar",
        "foo.bar.>",
    ]


def test_walk_sorts_literal_siblings_by_utf8_bytes() -> None:
    names = ("zeta", "alpha", "Beta", "10", "_x", "é", "\U0001f600", "\uffff", "alpha.two")
    walked = [name for name, _ in tree_of(*names).walk()]
    assert walked == ["10", "Beta", "_x", "alpha", "alpha.two", "zeta", "é", "\uffff", "\U0001f600"]
    top = [n for n in walked if "." not in n]
    assert top == sorted(top, key=lambda n: n.encode())


def test_insert_replaces_and_counts() -> None:
    tree: SubjectTree[int] = SubjectTree()
    tree.insert("a.b", 1)
    tree.insert("a.b", 2)
    tree.insert("a", 3)
    assert len(tree) == 2
    assert list(tree.walk()) == [("a", 3), ("a.b", 2)]
    assert tree.lookup_narrowest("a.b") == 2


def test_lookup_narrowest() -> None:
    tree = tree_of(*SPEC_82, "bar.baz", "foo.*.>", "foo.bar.>")
    assert tree.lookup_narrowest("foo.bar") == "foo.bar"
    assert tree.lookup_narrowest("foo.baz") == "foo.*"
    assert tree.lookup_narrowest("foo.bar.x") == "foo.bar.>"
    assert tree.lookup_narrowest("foo.qux.x") == "foo.*.>"
    assert tree.lookup_narrowest("x.bar") == "*.bar"
    assert tree.lookup_narrowest("x") == ">"
    assert tree_of("a.b").lookup_narrowest("x") is None
    # '>' followed by its '*' sibling: the '*' entry is last in the match list
    assert tree_of("foo.>", "foo.*").lookup_narrowest("foo.>") == "foo.*"


def test_invalid_names_are_stored_but_never_match() -> None:
    tree = tree_of("a.>.b", "", "a..b", "a")
    assert sorted(name for name, _ in tree.walk()) == ["", "a", "a..b", "a.>.b"]
    assert tree.match_list("a.>.b") == []
    assert tree.match_list("a..b") == ["a..b"]
    assert tree.match_list("") == [""]


def test_very_deep_names_do_not_recurse() -> None:
    deep_star = ".".join(["*"] * 5000)
    deep_literal = ".".join(["x"] * 5000)
    tree = tree_of(deep_star, deep_literal, ">")
    assert tree.match_list(deep_literal) == [">", deep_star, deep_literal]
    assert tree.lookup_narrowest(deep_literal) == deep_literal
    assert len(list(tree.walk())) == 3


# --- properties ------------------------------------------------------------------------


def brute_force_matches(patterns: list[str], query: str) -> list[str]:
    """Every pattern matching ``query`` (query tokens taken literally), in sublist order:
    lexicographic by token rank '>' < '*' < literal."""
    q = query.split(".")

    def matches(pattern: str) -> bool:
        p = pattern.split(".")
        for i, token in enumerate(p):
            if token == ">":
                return i == len(p) - 1 and len(q) > i
            if i >= len(q) or (token != "*" and token != q[i]):
                return False
        return len(p) == len(q)

    def rank(pattern: str) -> tuple[int, ...]:
        return tuple({">": 0, "*": 1}.get(t, 2) for t in pattern.split("."))

    return sorted((p for p in patterns if matches(p)), key=rank)


@dataclass
class _SpecNode:
    entries: list[str] = field(default_factory=list)
    next: _SpecLevel | None = None


@dataclass
class _SpecLevel:
    literal: dict[str, _SpecNode] = field(default_factory=dict)
    star: _SpecNode | None = None
    gt: _SpecNode | None = None


def spec_match(names: list[str], query: str) -> list[str]:
    """A literal transcription of the pseudo-code of defaults.md §8.2."""
    root = _SpecLevel()
    for name in names:
        level = root
        node = None
        for tok in name.split("."):
            if tok == "*":
                level.star = node = level.star or _SpecNode()
            elif tok == ">":
                level.gt = node = level.gt or _SpecNode()
            else:
                node = level.literal.setdefault(tok, _SpecNode())
            node.next = node.next or _SpecLevel()
            level = node.next
        assert node is not None
        node.entries.append(name)

    def match(level: _SpecLevel | None, tokens: list[str], out: list[str]) -> None:
        last_star = node = None
        for i, tok in enumerate(tokens):
            if level is None:
                return
            if level.gt:
                out += level.gt.entries
            if level.star:
                match(level.star.next, tokens[i + 1 :], out)
            last_star = level.star
            node = level.literal.get(tok)
            level = node.next if node else None
        if last_star:
            out += last_star.entries
        if node:
            out += node.entries

    out: list[str] = []
    match(root, query.split("."), out)
    return out


_TOKENS = st.sampled_from(["a", "b", "c"])
_PATTERN = st.builds(
    lambda toks, tail: ".".join(toks + tail),
    st.lists(st.one_of(_TOKENS, st.just("*")), min_size=0, max_size=3),
    st.sampled_from([[], [">"]]),
).filter(bool)
_PATTERNS = st.lists(_PATTERN, max_size=12, unique=True)
_LITERAL = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=5).map(".".join)


@given(_PATTERNS, _LITERAL)
def test_lookup_narrowest_agrees_with_brute_force(patterns: list[str], channel: str) -> None:
    tree = tree_of(*patterns)
    expected = brute_force_matches(patterns, channel)
    assert tree.match_list(channel) == expected
    assert tree.lookup_narrowest(channel) == (expected[-1] if expected else None)


@given(_PATTERNS, st.one_of(_LITERAL, _PATTERN))
def test_match_list_is_the_spec_pseudo_code(patterns: list[str], query: str) -> None:
    assert tree_of(*patterns).match_list(query) == spec_match(patterns, query)
    assert tree_of(*patterns).match_list(query) == brute_force_matches(patterns, query)


@given(st.lists(st.text(alphabet="ab.*> é\x00", max_size=8), max_size=20))
def test_walk_visits_every_name_exactly_once(names: list[str]) -> None:
    tree: SubjectTree[str] = SubjectTree()
    for name in names:
        tree.insert(name, name.upper())
    walked = list(tree.walk())
    assert Counter(name for name, _ in walked) == Counter(set(names))
    assert all(value == name.upper() for name, value in walked)
    assert len(tree) == len(set(names))
