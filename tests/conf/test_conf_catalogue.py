"""The language, as a catalogue: snippet -> expected tree, snippet -> expected error.

Trees are written with ``helpers.dump``: ``key @line:col = KIND value @line:col``
(``q`` marks quoted strings, ``[var]`` entries read through ``$KEY``).
"""

from __future__ import annotations

import pytest

from stanpkg.conf import ConfError, parse_string

from .helpers import dump, strip

ENV = {"ENV_SUBS": "15", "NAME": "abc", "QUOTED": '"x y"', "MAPV": "{a: 1}", "EMPTY": ""}

TREES: list[tuple[str, str, str]] = [
    # -- key/value separators ----------------------------------------------------------
    ("colon", "a: 1", "a @1:1 = INT 1 @1:4"),
    ("equals", "a = 1", "a @1:1 = INT 1 @1:5"),
    ("space", "a 1", "a @1:1 = INT 1 @1:3"),
    ("tight colon", "a:1", "a @1:1 = INT 1 @1:3"),
    ("tab", "a\t1", "a @1:1 = INT 1 @1:3"),
    (
        "semicolons",
        "a=1;b=2",
        """
        a @1:1 = INT 1 @1:3
        b @1:5 = INT 2 @1:7
        """,
    ),
    (
        "commas",
        "a: 1, b: 2",
        """
        a @1:1 = INT 1 @1:4
        b @1:7 = INT 2 @1:10
        """,
    ),
    (
        "newlines and CRLF",
        "a: 1\r\nb: 2\r\n",
        """
        a @1:1 = INT 1 @1:4
        b @2:1 = INT 2 @2:4
        """,
    ),
    # -- keys --------------------------------------------------------------------------
    ("double-quoted key", '"a b": 1', "a b @1:1 = INT 1 @1:8"),
    ("single-quoted key", "'x.y' = 2", "x.y @1:1 = INT 2 @1:9"),
    ("dotted bare key", "plain.unquoted: 3", "plain.unquoted @1:1 = INT 3 @1:17"),
    ("empty quoted key", '"": 1', "'' @1:1 = INT 1 @1:5"),
    ("no escapes in keys", '"a\\tb": 1', "a\\tb @1:1 = INT 1 @1:9"),
    ("subject key", "foo.> {}", "foo.> @1:1 = MAP @1:7"),
    ("key glued to map", "m{a:1}", "m @1:1 = MAP @1:2\n  a @1:3 = INT 1 @1:5"),
    ("quoted key glued to value", '"a"1', "a @1:1 = INT 1 @1:4"),
    ("include as an ordinary key", "include: 5", "include @1:1 = INT 5 @1:10"),
    ("key with inner hash", "a#b: 1", "a#b @1:1 = INT 1 @1:6"),
    # -- maps --------------------------------------------------------------------------
    (
        "map forms",
        "m { a: 1 }\nn: {b = 2}\no = { c 3; d 4, e: 5 }",
        """
        m @1:1 = MAP @1:3
          a @1:5 = INT 1 @1:8
        n @2:1 = MAP @2:4
          b @2:5 = INT 2 @2:9
        o @3:1 = MAP @3:5
          c @3:7 = INT 3 @3:9
          d @3:12 = INT 4 @3:14
          e @3:17 = INT 5 @3:20
        """,
    ),
    (
        "multi-line map with trailing separator",
        "m {\n  a: 1,\n  b: 2;\n}",
        """
        m @1:1 = MAP @1:3
          a @2:3 = INT 1 @2:6
          b @3:3 = INT 2 @3:6
        """,
    ),
    (
        "allman braces",
        "m\n{\n  a: 1\n}\nl =\n[\n  1\n]",
        """
        m @1:1 = MAP @2:1
          a @3:3 = INT 1 @3:6
        l @5:1 = ARRAY @6:1
          - INT 1 @7:3
        """,
    ),
    ("empty map", "m {}", "m @1:1 = MAP @1:3"),
    (
        "nested maps",
        "a { b { c { d: 1 } } }",
        """
        a @1:1 = MAP @1:3
          b @1:5 = MAP @1:7
            c @1:9 = MAP @1:11
              d @1:13 = INT 1 @1:16
        """,
    ),
    (
        "document in braces (JSON style)",
        '{\n  "a": 1,\n  "b": [true, "x"]\n}\n',
        """
        a @2:3 = INT 1 @2:8
        b @3:3 = ARRAY @3:8
          - BOOL True @3:9
          - STRING 'x' q @3:15
        """,
    ),
    # -- arrays ------------------------------------------------------------------------
    (
        "array of ints (Go misreads the last)",
        "a: [1, 2]",
        "a @1:1 = ARRAY @1:4\n  - INT 1 @1:5\n  - INT 2 @1:8",
    ),
    ("empty array", "a: []", "a @1:1 = ARRAY @1:4"),
    ("trailing comma", "a: [1,]", "a @1:1 = ARRAY @1:4\n  - INT 1 @1:5"),
    (
        "multi-line array with comments",
        'a: [\n  1, # one\n  "two" // two\n  # alone\n  3\n]',
        """
        a @1:1 = ARRAY @1:4
          - INT 1 @2:3
          - STRING 'two' q @3:3
          - INT 3 @5:3
        """,
    ),
    (
        "mixed and nested arrays",
        "a: [1, 'x', yes, 1.5, [2], {k: v}]",
        """
        a @1:1 = ARRAY @1:4
          - INT 1 @1:5
          - STRING 'x' q @1:8
          - BOOL True @1:13
          - FLOAT 1.5 @1:18
          - ARRAY @1:23
            - INT 2 @1:24
          - MAP @1:28
            k @1:29 = STRING 'v' @1:32
        """,
    ),
    (
        "unquoted strings in arrays",
        "routes = [nats://a:4222, nats://b:4222]",
        """
        routes @1:1 = ARRAY @1:10
          - STRING 'nats://a:4222' @1:11
          - STRING 'nats://b:4222' @1:26
        """,
    ),
    # -- comments ----------------------------------------------------------------------
    (
        "comments everywhere",
        "# top\n// top\na: 1 # after\nb: 2 // after\nm { # open\n  // in\n  c: 3 # x\n} # close\n",
        """
        a @3:1 = INT 1 @3:4
        b @4:1 = INT 2 @4:4
        m @5:1 = MAP @5:3
          c @7:3 = INT 3 @7:6
        """,
    ),
    ("hash inside a word", "a: b#c", "a @1:1 = STRING 'b#c' @1:4"),
    ("slashes inside a word", "dir: /var//lib", "dir @1:1 = STRING '/var//lib' @1:6"),
    ("comment only", "# nothing\n\n// here", ""),
    ("empty", "", ""),
    # -- strings -----------------------------------------------------------------------
    (
        "double-quoted escapes",
        r'a: "t\tn\nr\r q\" b\\ x\x41\x42"',
        "a @1:1 = STRING 't\\tn\\nr\\r q\" b\\\\ xAB' q @1:4",
    ),
    ("utf-8 byte escapes", r'a: "\xc3\xa9t\xc3\xa9"', "a @1:1 = STRING 'été' q @1:4"),
    ("single quotes: no escapes", r"a: 'raw\tvalue'", "a @1:1 = STRING 'raw\\\\tvalue' q @1:4"),
    ("multi-line string", 'a: "x\ny"\nb: 1', "a @1:1 = STRING 'x\\ny' q @1:4\nb @3:1 = INT 1 @3:4"),
    (
        "non-ascii",
        'a: "héllo ✓"\nb: ünï',
        "a @1:1 = STRING 'héllo ✓' q @1:4\nb @2:1 = STRING 'ünï' @2:4",
    ),
    ("unquoted word", "dir: ds", "dir @1:1 = STRING 'ds' @1:6"),
    ("unquoted with escape", r"a: x\ty", "a @1:1 = STRING 'x\\ty' @1:4"),
    ("unquoted url", "url: nats://host:4222", "url @1:1 = STRING 'nats://host:4222' @1:6"),
    ("quoted bool is a string", 'a: "true"', "a @1:1 = STRING 'true' q @1:4"),
    (
        "block string",
        "a (\nline 1\n  line 2\n)\nb: 1",
        "a @1:1 = STRING '\\nline 1\\n  line 2\\n' q @1:3\nb @5:1 = INT 1 @5:4",
    ),
    ("bcrypt hash is not a variable", "p: $2a$11$abc", "p @1:1 = STRING '$2a$11$abc' @1:4"),
    # -- digit-led words: durations, addresses -----------------------------------------
    ("duration 1h30m", "a: 1h30m", "a @1:1 = STRING '1h30m' @1:4"),
    ("duration 45s", "a: 45s", "a @1:1 = STRING '45s' @1:4"),
    ("duration 5ms", "a: 5ms", "a @1:1 = STRING '5ms' @1:4"),
    ("ip address", "a: 127.0.0.1", "a @1:1 = STRING '127.0.0.1' @1:4"),
    ("host:port", "a: 10.0.0.1:4222", "a @1:1 = STRING '10.0.0.1:4222' @1:4"),
    # -- numbers -----------------------------------------------------------------------
    ("int", "a: 42", "a @1:1 = INT 42 @1:4"),
    ("negative int", "a: -42", "a @1:1 = INT -42 @1:4"),
    ("leading zeros", "a: 007", "a @1:1 = INT 7 @1:4"),
    ("int64 max", "a: 9223372036854775807", "a @1:1 = INT 9223372036854775807 @1:4"),
    ("int64 min", "a: -9223372036854775808", "a @1:1 = INT -9223372036854775808 @1:4"),
    ("float", "a: 1.5", "a @1:1 = FLOAT 1.5 @1:4"),
    ("negative float", "a: -0.25", "a @1:1 = FLOAT -0.25 @1:4"),
    (
        "size suffixes",
        "a: 1k\nb: 1KB\nc: 1ki\nd: 1KiB\ne: 2M\nf: 2mib\n"
        "g: 1G\nh: 1t\ni: 1Pi\nj: 1E\nk: -1k\nl: 7eb",
        f"""
        a @1:1 = INT 1000 @1:4
        b @2:1 = INT 1024 @2:4
        c @3:1 = INT 1024 @3:4
        d @4:1 = INT 1024 @4:4
        e @5:1 = INT 2000000 @5:4
        f @6:1 = INT {2 * 1024**2} @6:4
        g @7:1 = INT {10**9} @7:4
        h @8:1 = INT {10**12} @8:4
        i @9:1 = INT {1024**5} @9:4
        j @10:1 = INT {10**18} @10:4
        k @11:1 = INT -1000 @11:4
        l @12:1 = INT {7 * 1024**6} @12:4
        """,
    ),
    ("size at the int64 limit", "a: -8EB", f"a @1:1 = INT {-(2**63)} @1:4"),
    ("int before brace", "m {a: 5}", "m @1:1 = MAP @1:3\n  a @1:4 = INT 5 @1:7"),
    ("int before bracket", "a: [5]", "a @1:1 = ARRAY @1:4\n  - INT 5 @1:5"),
    # -- booleans and datetimes --------------------------------------------------------
    (
        "booleans",
        "a: true\nb: FALSE\nc: Yes\nd: no\ne: ON\nf: off",
        """
        a @1:1 = BOOL True @1:4
        b @2:1 = BOOL False @2:4
        c @3:1 = BOOL True @3:4
        d @4:1 = BOOL False @4:4
        e @5:1 = BOOL True @5:4
        f @6:1 = BOOL False @6:4
        """,
    ),
    ("datetime", "a: 2024-01-01T00:00:00Z", "a @1:1 = DATETIME 2024-01-01T00:00:00+00:00 @1:4"),
    # -- variables ---------------------------------------------------------------------
    (
        "variable",
        "A = 1\nb: $A",
        """
        A @1:1 [var] = INT 1 @1:5
        b @2:1 = INT 1 @2:4
        """,
    ),
    (
        "block scope, innermost wins",
        "V: 1\nm {\n  V: 2\n  x: $V\n}\ny: $V",
        """
        V @1:1 [var] = INT 1 @1:4
        m @2:1 = MAP @2:3
          V @3:3 [var] = INT 2 @3:6
          x @4:3 = INT 2 @4:6
        y @6:1 = INT 1 @6:4
        """,
    ),
    (
        "outer scope seen from a child",
        "V: 1\nm { n { x: $V } }",
        """
        V @1:1 [var] = INT 1 @1:4
        m @2:1 = MAP @2:3
          n @2:5 = MAP @2:7
            x @2:9 = INT 1 @2:12
        """,
    ),
    (
        "variable holding a map",
        "M { a: 1 }\nb: $M",
        "M @1:1 [var] = MAP @1:3\n  a @1:5 = INT 1 @1:8\nb @2:1 = MAP @2:4\n  a @1:5 = INT 1 @1:8",
    ),
    (
        "variable in an array",
        "V: 1\na: [$V, 2]",
        "V @1:1 [var] = INT 1 @1:4\na @2:1 = ARRAY @2:4\n  - INT 1 @2:5\n  - INT 2 @2:9",
    ),
    ("environment, parsed", "a: $ENV_SUBS", "a @1:1 = INT 15 @1:4"),
    ("environment string", "a: $NAME", "a @1:1 = STRING 'abc' @1:4"),
    ("environment quoted string", "a: $QUOTED", "a @1:1 = STRING 'x y' q @1:4"),
    ("environment map", "a: $MAPV", "a @1:1 = MAP @1:4\n  a @1:2 = INT 1 @1:5"),
    ("environment empty", "a: $EMPTY", "a @1:1 = STRING '' @1:4"),
    (
        "file beats environment",
        "NAME: 1\na: $NAME",
        "NAME @1:1 [var] = INT 1 @1:7\na @2:1 = INT 1 @2:4",
    ),
    (
        "variable used, then redefined",
        "V: 1\na: $V\nV: 2",
        """
        a @2:1 = INT 1 @2:4
        V @3:1 = INT 2 @3:4
        """,
    ),
    # -- duplicates --------------------------------------------------------------------
    ("last one wins", "a: 1\nb: 2\na: 3", "b @2:1 = INT 2 @2:4\na @3:1 = INT 3 @3:4"),
    (
        "maps are replaced, not merged",
        "m { x: 1 }\nm { y: 2 }",
        "m @2:1 = MAP @2:3\n  y @2:5 = INT 2 @2:8",
    ),
    ("keys are case-sensitive", "a: 1\nA: 2", "a @1:1 = INT 1 @1:4\nA @2:1 = INT 2 @2:4"),
]


@pytest.mark.parametrize(("name", "text", "expected"), TREES, ids=[c[0] for c in TREES])
def test_tree(name: str, text: str, expected: str) -> None:
    assert dump(parse_string(text, env=ENV)) == strip(expected)


DEEP = "a " + "{ b " * 101 + "1" + " }" * 101

ERRORS: list[tuple[str, str, int, int, str]] = [
    # -- unterminated things: reported where they open ---------------------------------
    ("unterminated string", 'a: "x\nb: 2', 1, 4, "unterminated string"),
    ("unterminated single-quoted string", "a: 'x", 1, 4, "unterminated string"),
    ("unterminated map", "a {\n  b: 1\n", 1, 3, "unterminated map"),
    ("unterminated inner map", "a { b { c: 1 }", 1, 3, "unterminated map"),
    ("unterminated array", "a [1,\n 2", 1, 3, "unterminated array"),
    ("unterminated block", "a: (\nfoo\n", 1, 4, "unterminated block"),
    ("unterminated quoted key", '"a: 1', 1, 1, "unterminated quoted key"),
    ("unterminated include path", 'include "x', 1, 9, "unterminated include path"),
    # -- stray closers and garbage -----------------------------------------------------
    ("stray brace", "}", 1, 1, "no map is open"),
    ("stray brace after value", "a: 1\n}", 2, 1, "no map is open"),
    ("extra closing brace", "a { }\n}", 2, 1, "no map is open"),
    ("extra brace on the same line", "a { } }", 1, 7, "no map is open"),
    ("stray bracket", "]", 1, 1, "no array is open"),
    ("bracket inside map", "m {\n  a: 1\n  ]", 3, 3, "unexpected ']' inside a map"),
    ("brace inside array", "a [1 }", 1, 6, "after an array element"),
    ("trailing garbage", "streaming { } garbage", 1, 15, "unexpected 'g' after a value"),
    ("two values", "a: 1 2", 1, 6, "unexpected '2' after a value"),
    ("missing map separator", "m { a: 1 b: 2 }", 1, 10, "map entries are separated"),
    ("missing array separator", "a: [1 2]", 1, 7, "after an array element"),
    ("leading comma in array", "a: [,1]", 1, 5, "expected a value, got ','"),
    ("double comma in array", "a: [1,,2]", 1, 7, "expected a value, got ','"),
    ("double separator in map", "m { a: 1,, b: 2 }", 1, 10, "expected a key, got ','"),
    ("after the document braces", "{ a: 1 } b: 2", 1, 10, "after the '}' that closes the document"),
    ("second top-level brace", "a: 1\n{ b: 2 }", 2, 1, "expected a key, got '{'"),
    # -- keys without values -----------------------------------------------------------
    ("key alone", "foo", 1, 1, "key 'foo' has no value"),
    ("key alone at the end", "a: 1\nfoo\n", 2, 1, "key 'foo' has no value"),
    ("key and separator", "foo:", 1, 1, "key 'foo' has no value"),
    ("key and separator then spaces", "foo =   \n", 1, 1, "key 'foo' has no value"),
    ("value on the next line", "a:\n1", 1, 1, "key 'a' has no value"),
    ("key alone in map", "m { a }", 1, 5, "key 'a' has no value"),
    ("key and separator in map", "m { a: }", 1, 5, "key 'a' has no value"),
    ("key before comma", "m { a, b: 1 }", 1, 5, "key 'a' has no value"),
    ("comment instead of value", "color: #fff", 1, 1, "'#' starts a comment"),
    ("separator without key", "streaming { : 5 }", 1, 13, "expected a key, got ':'"),
    ("separator without key at top", "= 5", 1, 1, "expected a key, got '='"),
    # -- strings -----------------------------------------------------------------------
    ("invalid escape", 'a: "b\\qc"', 1, 6, "invalid escape '\\q'"),
    ("invalid escape in a word", "a: b\\qc", 1, 5, "invalid escape '\\q'"),
    ("backslash at the end of a word", "a: b\\", 1, 5, "must be followed by an escape"),
    ("short hex escape", 'a: "\\x4"', 1, 5, "two hexadecimal digits"),
    ("bad hex escape", 'a: "\\xzz"', 1, 5, "two hexadecimal digits"),
    ("hex escape not utf-8", 'a: "ok\\xff"', 1, 7, "valid UTF-8"),
    ("quote inside a word", "a: b'c", 1, 5, "quote inside an unquoted value"),
    ("double quote inside a word", 'a: b"c', 1, 5, "quote inside an unquoted value"),
    ("value starting with a dot", "dir: ./data", 1, 6, "cannot start with '.'"),
    ("empty variable", "a: $", 1, 4, "'$' must be followed by a variable name"),
    # -- numbers -----------------------------------------------------------------------
    ("size overflow", "a: 8EB", 1, 4, "does not fit in a signed 64-bit integer"),
    ("int overflow", "a: 9223372036854775808", 1, 4, "does not fit"),
    ("negative overflow", "a: -9223372036854775809", 1, 4, "does not fit"),
    ("suffix overflow", "a: 10000000000000000000000k", 1, 4, "does not fit"),
    ("float with unit", "a: 1.5h", 1, 7, "unexpected 'h' after the number '1.5'"),
    ("float size", "a: 1.5MB", 1, 7, "unexpected 'M' after the number '1.5'"),
    ("float in map", "m {\n  max_age: 1.5h\n}", 2, 15, "unexpected 'h'"),
    ("dot without digits", "a: 1.", 1, 6, "must be followed by a digit"),
    ("exponent", "a: 1.5e3", 1, 7, "unexpected 'e'"),
    ("bad ip", "a: 1.2.3x", 1, 9, "unexpected 'x'"),
    ("float overflow", "a: 1" + "0" * 400 + ".0", 1, 4, "out of range"),
    ("compound duration", "a: 1m30s", 1, 5, "neither a number nor a size"),
    ("size then digits", "a: 1e5", 1, 5, "neither a number nor a size"),
    ("bad size suffix", "a: 1kbi", 1, 5, "neither a number nor a size"),
    ("negative word", "a: -5s", 1, 6, "unexpected 's'"),
    ("lone minus", "a: -", 1, 5, "expected a digit after '-'"),
    ("minus word", "a: -x", 1, 5, "expected a digit after '-'"),
    ("short date", "a: 2024-01-01", 1, 4, "invalid datetime"),
    ("bad month", "a: 2024-13-01T00:00:00Z", 1, 4, "month must be in 1..12"),
    ("dash after digits", "a: 12-34", 1, 6, "dates must be written"),
    # -- characters --------------------------------------------------------------------
    ("NUL", "a: 1\x00", 1, 5, "control character U+0000"),
    ("control in a string", 'a: "x\x01y"', 1, 6, "control character U+0001"),
    ("control in a comment", "# bell \x07\na: 1", 1, 8, "control character U+0007"),
    ("DEL", "a\x7f: 1", 1, 2, "control character U+007F"),
    ("lone surrogate", "a: \udcff", 1, 4, "lone surrogate"),
    # -- variables and includes --------------------------------------------------------
    ("unknown variable", "a: $CAP", 1, 4, "variable reference for 'CAP' can not be found"),
    ("variable out of scope", "m { CAP: 5 }\nb: $CAP", 2, 4, "variable reference for 'CAP'"),
    ("variable defined later", "b: $V\nV: 1", 1, 4, "variable reference for 'V'"),
    ("sibling scope", "m { V: 1 }\nn { x: $V }", 2, 8, "variable reference for 'V'"),
    ("missing include", "include 'nope.conf'", 1, 1, "include file 'nope.conf'"),
    ("include of a map", "include { a: 1 }", 1, 9, "include needs a file path"),
    ("include of a number-like path", "include 5.conf", 1, 9, "include needs a file path"),
    ("empty include path", "include ''", 1, 9, "empty include path"),
    # -- limits ------------------------------------------------------------------------
    ("nesting too deep", DEEP, 1, 403, "nested deeper than 100 levels"),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "col", "message"), ERRORS, ids=[c[0] for c in ERRORS]
)
def test_error(name: str, text: str, line: int, col: int, message: str, tmp_path: object) -> None:
    with pytest.raises(ConfError) as info:
        parse_string(text, filename="t.conf", env=ENV, base_dir=str(tmp_path))
    err = info.value
    assert (err.pos.file, err.pos.line, err.pos.col) == ("t.conf", line, col), str(err)
    assert message in err.message
    assert str(err) == f"t.conf:{line}:{col}: {err.message}"
