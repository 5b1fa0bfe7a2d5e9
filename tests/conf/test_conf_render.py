"""render(): canonical text that parses back to the same tree."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stanpkg.conf import Kind, MapEntry, Node, Position, parse_string, parse_value, render

from .helpers import strip
from .test_conf_catalogue import ENV, TREES

P = Position("x", 1, 1)


def m(**entries: Node) -> Node:
    return Node(Kind.MAP, tuple(MapEntry(k, P, v) for k, v in entries.items()), P)


def test_canonical_form() -> None:
    tree = parse_string(
        """
        # comment
        a = 10KB; b 'x'
        c { d: yes, e: [1, 2.5, "s"], f {} }
        g: [ { h: 1 }, [2, 3] ]
        t: 2024-01-02T03:04:05Z
        "with space": 1
        include: ok
        """
    )
    assert (
        render(tree)
        == strip(
            """
        a: 10240
        b: "x"
        c {
          d: true
          e: [1, 2.5, "s"]
          f {}
        }
        g: [
          {
            h: 1
          }
          [2, 3]
        ]
        t: 2024-01-02T03:04:05Z
        "with space": 1
        "include": "ok"
        """
        )
        + "\n"
    )


@pytest.mark.parametrize(("name", "text"), [(c[0], c[1]) for c in TREES])
def test_catalogue_round_trips(name: str, text: str) -> None:
    tree = parse_string(text, env=ENV)
    assert parse_string(render(tree), env={}) == tree


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e20, "100000000000000000000.0"),
        (1e-7, "0.0000001"),
        (-0.0, "-0.0"),
        (2.5, "2.5"),
        (3.0, "3.0"),
    ],
)
def test_floats(value: float, text: str) -> None:
    node = Node(Kind.FLOAT, value, P)
    assert render(node) == text
    assert parse_value(text) == node


def test_strings_escape_what_they_must() -> None:
    value = 'q" b\\ \t\n\r \x00 \x7f \x85 é ✓'
    text = render(Node(Kind.STRING, value, P))
    assert text == '"q\\" b\\\\ \\t\\n\\r \\x00 \\x7f \\xc2\\x85 é ✓"'
    assert parse_value(text).value == value


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("plain_key.1-x", "plain_key.1-x: 1\n"),
        ("include", '"include": 1\n'),
        ("Include", '"Include": 1\n'),
        ("a b", '"a b": 1\n'),
        ("foo.>", '"foo.>": 1\n'),
        ('say "hi"', "'say \"hi\"': 1\n"),
        ("", '"": 1\n'),
    ],
)
def test_keys(key: str, text: str) -> None:
    tree = m(**{key: Node(Kind.INT, 1, P)})
    assert render(tree) == text
    assert parse_string(text) == tree


@pytest.mark.parametrize(
    "node",
    [
        m(**{"both ' and \"": Node(Kind.INT, 1, P)}),
        m(**{"new\nline": Node(Kind.INT, 1, P)}),
        Node(Kind.FLOAT, float("inf"), P),
        Node(Kind.FLOAT, float("nan"), P),
        Node(Kind.DATETIME, datetime(2024, 1, 1), P),  # naive
        Node(Kind.DATETIME, datetime(2024, 1, 1, 0, 0, 0, 5, tzinfo=UTC), P),
    ],
)
def test_unrenderable(node: Node) -> None:
    with pytest.raises(ValueError):
        render(node)


def test_single_values() -> None:
    for text in ["[1, [2, {a: 3}], {}]", "'x'", "-5", "2024-02-29T23:59:59Z", "true"]:
        node = parse_value(text)
        assert parse_value(render(node)) == node
    # A MAP renders as a document (its entries without braces).
    node = parse_value("{a: {b: [1]}}")
    assert render(node) == "a {\n  b: [1]\n}\n"
    assert parse_string(render(node)) == node


def test_empty_document() -> None:
    assert render(parse_string("# nothing")) == ""
