"""Properties: any text parses or fails with a sane position; render -> parse is identity."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stanpkg.conf import (
    ConfError,
    Kind,
    MapEntry,
    Node,
    Position,
    parse_string,
    parse_value,
    render,
)

# STANPKG_CONF_FUZZ=10000 for a longer hunt; the defaults keep the suite fast.
_EXAMPLES = int(os.environ.get("STANPKG_CONF_FUZZ", "300"))
FAST = settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Generating trees costs more than checking them.
TREES = settings(FAST, max_examples=max(_EXAMPLES // 3, 1))

# Pieces of the language, to build texts that get further than random characters.
PIECES = [
    "a", "b1", "include", "streaming", "'k'", '"k"', " ", "\t", "\n", "\r\n", ":", "=",
    ",", ";", "{", "}", "[", "]", "(", ")", "\n)\n", "#c", "//c", "/", '"', "'", "\\",
    '"x\\ty"', "'raw'", '"\\q"', '"\\x41"', '"\\xff"', "1", "-", "-7", "1.5", "1.", ".5",
    "10KB", "8EB", "1kbi", "1m30s", "45s", "1h", "127.0.0.1:4222", "9" * 30, "1" + "0" * 400,
    "2024-01-01T00:00:00Z", "2024-13-01T00:00:00Z", "true", "Yes", "off", "$a", "$NOPE",
    "$2a$11$x", "$", "missing.conf", "\x00", "\x7f", "é", "\ufeff", "\u2028", "\udcff",
]  # fmt: skip

texts = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
    st.integers(0, 300).map(lambda n: "a " + "{ b " * n + "1" + " }" * n),
    st.integers(0, 300).map(lambda n: "a: " + "[" * n + "]" * n),
    st.integers(0, 300).map(lambda n: "a: " + "[" * n),
    st.integers(0, 10**60).map(lambda n: f"a: {n}\nb: -{n}KiB\nc: {n}.{n}"),
)


def reparse(node: Node) -> Node:
    """Parse the rendering of ``node``: a document for a MAP, a single value otherwise."""
    text = render(node)
    return parse_string(text, env={}) if node.kind is Kind.MAP else parse_value(text, env={})


def check_position(err: ConfError, text: str, filename: str) -> None:
    assert isinstance(err.pos, Position)
    assert err.pos.file == filename
    lines = text.removeprefix("\ufeff").split("\n")
    assert 1 <= err.pos.line <= len(lines), (err, text)
    assert 1 <= err.pos.col <= len(lines[err.pos.line - 1]) + 1, (err, text)
    assert str(err).startswith(f"{filename}:{err.pos.line}:{err.pos.col}: ")


@FAST
@given(texts)
def test_any_text_parses_or_fails_with_a_position(text: str) -> None:
    try:
        tree = parse_string(text, filename="fuzz.conf", env={}, base_dir="/nonexistent-dir")
    except ConfError as err:
        check_position(err, text, "fuzz.conf")
    else:
        assert tree.kind is Kind.MAP
        # Whatever parses renders, and the rendering parses to the same tree.
        assert parse_string(render(tree), env={}) == tree


@FAST
@given(texts)
def test_any_value_parses_or_fails_with_a_position(text: str) -> None:
    try:
        node = parse_value(text, "-flag", env={})
    except ConfError as err:
        check_position(err, text, "-flag")
    else:
        assert reparse(node) == node


# -- random trees --------------------------------------------------------------------

P = Position("gen", 1, 1)


def _node(kind: Kind, value: object) -> Node:
    return Node(kind, value, P)


keys = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=8).filter(
    lambda k: not ('"' in k and "'" in k)
)

scalars = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), max_size=20).map(
        lambda s: _node(Kind.STRING, s)
    ),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: _node(Kind.INT, i)),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: _node(Kind.FLOAT, f)),
    st.booleans().map(lambda b: _node(Kind.BOOL, b)),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)).map(
        lambda d: _node(Kind.DATETIME, d.replace(microsecond=0, tzinfo=UTC))
    ),
)


def _map(d: dict[str, Node]) -> Node:
    return _node(Kind.MAP, tuple(MapEntry(k, P, v) for k, v in d.items()))


trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(lambda xs: _node(Kind.ARRAY, tuple(xs))),
        st.dictionaries(keys, children, max_size=4).map(_map),
    ),
    max_leaves=25,
)


@TREES
@given(st.dictionaries(keys, trees, max_size=6).map(_map))
def test_render_then_parse_is_identity(tree: Node) -> None:
    text = render(tree)
    assert parse_string(text, env={}) == tree, text


@TREES
@given(trees)
def test_render_then_parse_value_is_identity(node: Node) -> None:
    assert reparse(node) == node
