"""Files, includes, the environment, parse_value and the node API."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from stanpkg.conf import (
    ConfError,
    Kind,
    MapEntry,
    Node,
    Position,
    parse_file,
    parse_string,
    parse_value,
)

from .helpers import dump, strip


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def error(fn: object, *args: object, **kwargs: object) -> ConfError:
    assert callable(fn)
    with pytest.raises(ConfError) as info:
        fn(*args, **kwargs)
    return info.value


# -- files ---------------------------------------------------------------------------


def test_missing_top_file(tmp_path: Path) -> None:
    path = tmp_path / "none.conf"
    err = error(parse_file, path)
    assert err.pos == Position(str(path), 0, 0)
    assert err.message == f"cannot read {path}: No such file or directory"


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    err = error(parse_file, tmp_path)
    assert "not a regular file" in err.message


def test_invalid_utf8(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.conf", b'a: 1\nb: "\xc3\xa9\xff"\n')
    err = error(parse_file, path)
    assert (err.pos.line, err.pos.col) == (2, 6)
    assert err.message == "invalid UTF-8 byte 0xff"


def test_bom_is_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "bom.conf", b"\xef\xbb\xbfa: 1\n")
    tree = parse_file(path)
    assert dump(tree) == "a @1:1 = INT 1 @1:4"


def test_positions_name_the_file_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "conf" / "a.conf", "a: 1")
    monkeypatch.chdir(tmp_path)
    entry = parse_file("conf/a.conf").get("a")
    assert entry is not None and str(entry.key_pos) == "conf/a.conf:1:1"


# -- includes ------------------------------------------------------------------------


def test_include_relative_to_each_file(tmp_path: Path) -> None:
    write(tmp_path / "main.conf", 'x: 0\ninclude "sub/one.inc"\nm { include two.inc }\n')
    write(tmp_path / "sub" / "one.inc", "a: 1\ninclude 'deeper/three.inc'\n")
    write(tmp_path / "sub" / "deeper" / "three.inc", "c: 3")
    write(tmp_path / "two.inc", "b: 2; c: 22")
    tree = parse_file(tmp_path / "main.conf")
    assert dump(tree) == strip(
        """
        x @1:1 = INT 0 @1:4
        a @1:1 = INT 1 @1:4
        c @1:1 = INT 3 @1:4
        m @3:1 = MAP @3:3
          b @1:1 = INT 2 @1:4
          c @1:7 = INT 22 @1:10
        """
    )
    c = tree.get("c")
    assert c is not None and c.key_pos.file == str(tmp_path / "sub" / "deeper" / "three.inc")


def test_include_last_wins_and_duplicates(tmp_path: Path) -> None:
    write(tmp_path / "a.inc", "k: 1\nk: 2\n")
    tree = parse_string("k: 0\ninclude a.inc\nk: 3", base_dir=tmp_path)
    assert dump(tree) == "k @3:1 = INT 3 @3:4"
    dups = [(e.node.value, e.key_pos.file, e.key_pos.line) for e in tree.duplicates]
    inc = str(tmp_path / "a.inc")
    assert sorted(dups, key=str) == sorted([(0, "<string>", 1), (1, inc, 1), (2, inc, 2)], key=str)


def test_included_keys_are_variables_after_the_include(tmp_path: Path) -> None:
    write(tmp_path / "vars.inc", "V: 7")
    tree = parse_string("include vars.inc\na: $V", base_dir=tmp_path)
    v = tree.get("V")
    assert v is not None and v.used_as_variable
    assert tree.get("a") == MapEntry("a", Position("x", 0, 0), Node(Kind.INT, 7, v.key_pos))


def test_included_file_does_not_see_includer_keys(tmp_path: Path) -> None:
    write(tmp_path / "uses.inc", "a: $OUTER")
    err = error(parse_string, "OUTER: 1\ninclude uses.inc", env={}, base_dir=tmp_path)
    assert err.pos == Position(str(tmp_path / "uses.inc"), 1, 4)
    assert err.message.endswith("(included from <string>:2:1)")


def test_include_errors_carry_the_chain(tmp_path: Path) -> None:
    write(tmp_path / "a.inc", "include b.inc")
    write(tmp_path / "b.inc", b"x: \xff")
    err = error(parse_string, "include a.inc", base_dir=tmp_path)
    assert err.pos == Position(str(tmp_path / "b.inc"), 1, 4)
    assert err.message == (
        f"invalid UTF-8 byte 0xff (included from {tmp_path / 'a.inc'}:1:1)"
        " (included from <string>:1:1)"
    )


def test_missing_include(tmp_path: Path) -> None:
    write(tmp_path / "main.conf", "a: 1\n  include missing.conf\n")
    err = error(parse_file, tmp_path / "main.conf")
    assert (err.pos.line, err.pos.col) == (2, 3)
    assert "include file 'missing.conf'" in err.message and "not found" in err.message


def test_include_of_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    err = error(parse_string, "include d", base_dir=tmp_path)
    assert "not a regular file" in err.message


def test_include_cycle(tmp_path: Path) -> None:
    write(tmp_path / "a.conf", "x: 1\ninclude b.conf")
    write(tmp_path / "b.conf", "include a.conf")
    err = error(parse_file, tmp_path / "a.conf")
    assert err.pos == Position(str(tmp_path / "b.conf"), 1, 1)
    assert err.message.startswith("include cycle: ")
    assert "a.conf -> " in err.message


def test_self_include(tmp_path: Path) -> None:
    write(tmp_path / "self.conf", "include self.conf")
    err = error(parse_file, tmp_path / "self.conf")
    assert err.pos == Position(str(tmp_path / "self.conf"), 1, 1)
    assert "include cycle" in err.message


def test_include_nesting_limit(tmp_path: Path) -> None:
    for i in range(40):
        write(tmp_path / f"f{i}.inc", f"include f{i + 1}.inc")
    write(tmp_path / "f40.inc", "a: 1")
    err = error(parse_string, "include f0.inc", base_dir=tmp_path)
    assert "includes nested deeper than" in err.message


def test_nesting_limit_counts_across_includes(tmp_path: Path) -> None:
    write(tmp_path / "deep.inc", "b " + "{ c " * 60 + "1" + " }" * 60)
    ok = "a " + "{ x " * 38 + "{ include deep.inc" + " }" * 39
    parse_string(ok, base_dir=tmp_path)
    too_deep = "a " + "{ x " * 40 + "{ include deep.inc" + " }" * 41
    err = error(parse_string, too_deep, base_dir=tmp_path)
    assert "nested deeper than 100 levels" in err.message


# -- the environment -----------------------------------------------------------------


def test_default_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANPKG_TEST_VAR", "12KB")
    assert parse_string("a: $STANPKG_TEST_VAR").entries[0].node.value == 12 * 1024


def test_environment_chain() -> None:
    tree = parse_string("a: $A", env={"A": "[$B, 2]", "B": "1"})
    assert tree.entries[0].node == Node(Kind.ARRAY, (Node(Kind.INT, 1, P), Node(Kind.INT, 2, P)), P)


def test_environment_cycle() -> None:
    err = error(parse_string, "x: 1\na: $A", env={"A": "$B", "B": "$A"})
    assert (err.pos.line, err.pos.col) == (2, 4)
    assert "refers to itself" in err.message


def test_environment_invalid_value() -> None:
    err = error(parse_string, "a: $A", env={"A": "1 2"})
    assert (err.pos.line, err.pos.col) == (1, 4)
    assert err.message.startswith("environment variable 'A' does not hold a valid value: ")


# -- parse_value ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "value", "raw"),
    [
        ("10KB", Kind.INT, 10240, "10KB"),
        ("1k", Kind.INT, 1000, "1k"),
        ("  5  # comment", Kind.INT, 5, "5"),
        ("abc", Kind.STRING, "abc", "abc"),
        ('"a b"', Kind.STRING, "a b", '"a b"'),
        ("off", Kind.BOOL, False, "off"),
        ("0.5", Kind.FLOAT, 0.5, "0.5"),
    ],
)
def test_parse_value(text: str, kind: Kind, value: object, raw: str) -> None:
    node = parse_value(text)
    assert (node.kind, node.value, node.raw) == (kind, value, raw)


@pytest.mark.parametrize(
    ("text", "col", "message"),
    [
        ("1.5MB", 4, "unexpected 'M'"),
        ("", 1, "expected a value"),
        ("1 2", 3, "unexpected '2' after the value"),
        ("8EB", 1, "does not fit"),
        ("$NOPE", 1, "variable reference for 'NOPE' can not be found"),
    ],
)
def test_parse_value_errors(text: str, col: int, message: str) -> None:
    err = error(parse_value, text, "--file_buffer_size", env={})
    assert err.pos == Position("--file_buffer_size", 1, col)
    assert message in err.message


def test_parse_value_map() -> None:
    node = parse_value("{a: 1, b: [x]}")
    assert node.kind is Kind.MAP and [e.key for e in node.entries] == ["a", "b"]


# -- the node API --------------------------------------------------------------------

P = Position("x", 1, 1)


def test_position_and_error_strings() -> None:
    pos = Position("a.conf", 3, 5)
    assert str(pos) == "a.conf:3:5"
    err = ConfError(pos, "boom")
    assert (err.pos, err.message, str(err)) == (pos, "boom", "a.conf:3:5: boom")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.pos, copy.message) == (pos, "boom")


def test_equality_ignores_positions_and_source_form() -> None:
    a = parse_string("m { x: 10KB, s: 'v', b: yes }")
    b = parse_string('\n\nm {\n  x = 10240\n  s = "v"\n  b = true\n}')
    assert a == b and hash(a) == hash(b)
    assert a != parse_string("m { x: 10KB, s: 'v', b: 1 }")
    assert a != parse_string("m { s: 'v', x: 10KB, b: yes }")  # order matters
    assert Node(Kind.INT, 1, P) != Node(Kind.BOOL, True, P)
    assert Node(Kind.INT, 1, P) != Node(Kind.FLOAT, 1.0, P)


def test_get_and_casefold() -> None:
    tree = parse_string("Max_Msgs: 1\nmax_msgs: 2\nother: 3")
    exact = tree.get("Max_Msgs")
    assert exact is not None and exact.node.value == 1
    folded = tree.get("MAX_MSGS", casefold=True)
    assert folded is not None and folded.node.value == 2  # the last one defined
    assert tree.get("nope") is None and tree.get("NOPE", casefold=True) is None


def test_duplicates_record_shadowed_entries() -> None:
    tree = parse_string("a: 1\nm { x: 1 }\na: 2\nm { y: 2 }\na: 3")
    assert [(e.key, e.key_pos.line, e.node.kind) for e in tree.duplicates] == [
        ("a", 1, Kind.INT),
        ("m", 2, Kind.MAP),
        ("a", 3, Kind.INT),
    ]
    assert [e.key for e in tree.entries] == ["m", "a"]


def test_accessors_check_the_kind() -> None:
    node = parse_value("[1]")
    assert node.items == (Node(Kind.INT, 1, P),)
    with pytest.raises(TypeError):
        _ = node.entries
    with pytest.raises(TypeError):
        node.get("x")
    with pytest.raises(TypeError):
        _ = parse_value("{}").items


def test_raw_and_quoted() -> None:
    tree = parse_string("a: 10KB\nb: 'x'\nc: \"y\\t\"\nd: z\ne: $a")
    raws = {e.key: (e.node.raw, e.node.quoted) for e in tree.entries}
    assert raws == {
        "a": ("10KB", False),
        "b": ("'x'", True),
        "c": ('"y\\t"', True),
        "d": ("z", False),
        "e": ("10KB", False),
    }
