"""The conformance cases of the Go reference, parsed for real.

Every ``.conf`` the reference accepted must parse; those it rejected for their syntax
(and the ones where it silently accepts a mistake, like ``8EB``) must raise at the right
line. Where the reference reports the end of the file for an unterminated string, we
report the opening quote.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.conf import ConfError, Kind, Node, parse_file, parse_value

CONFORMANCE = Path("/work/shared/conformance")
pytestmark = pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="no conformance cases")

# case -> (line, col, message fragment); the reference's line is the same except where noted
REJECTED = {
    "err_key_separator_only": (1, 13, "expected a key, got ':'"),
    "syntax_duration_unquoted_fraction": (3, 17, "unexpected 'h' after the number '1.5'"),
    "syntax_invalid_escape": (2, 19, "invalid escape '\\q'"),
    "syntax_trailing_garbage": (1, 31, "unexpected 'g'"),
    "syntax_unterminated_string": (2, 15, "unterminated string"),  # reference: line 4 (EOF)
    "syntax_var_out_of_scope": (6, 31, "variable reference for 'CAP' can not be found"),
    # The reference wraps 8EB to -9223372036854775808 and fails later; we stop here.
    "syntax_size_overflow": (3, 29, "does not fit in a signed 64-bit integer"),
}


def _cases() -> list[str]:
    if not CONFORMANCE.is_dir():
        return []
    return sorted(p.stem for p in CONFORMANCE.glob("*.conf"))


def _env(name: str) -> dict[str, str]:
    env: dict[str, str] = {}
    path = CONFORMANCE / f"{name}.env"
    if path.exists():
        for line in path.read_text().splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                env[key] = value
    return env


def _parse(name: str) -> Node:
    return parse_file(CONFORMANCE / f"{name}.conf", env=_env(name))


def plain(node: Node) -> object:
    if node.kind is Kind.MAP:
        return {e.key: plain(e.node) for e in node.entries}
    if node.kind is Kind.ARRAY:
        return [plain(n) for n in node.items]
    return node.value


def test_rejections_exist() -> None:
    assert set(REJECTED) <= set(_cases())


@pytest.mark.parametrize("name", _cases())
def test_case(name: str) -> None:
    if name not in REJECTED:
        assert _parse(name).kind is Kind.MAP
        return
    line, col, message = REJECTED[name]
    with pytest.raises(ConfError) as info:
        _parse(name)
    pos = info.value.pos
    assert (Path(pos.file).name, pos.line, pos.col) == (f"{name}.conf", line, col)
    assert message in info.value.message


@pytest.mark.parametrize("inc", sorted(p.name for p in (CONFORMANCE / "inc").glob("*")))
def test_include_files_parse(inc: str) -> None:
    parse_file(CONFORMANCE / "inc" / inc, env={})


def test_cli_mb_float() -> None:
    # cli_mb_float.args: -mb 1.5MB
    with pytest.raises(ConfError) as info:
        parse_value("1.5MB", "-mb")
    assert str(info.value).startswith("-mb:1:4: unexpected 'M'")


def _limits(tree: Node) -> dict[str, object]:
    streaming = plain(tree)
    assert isinstance(streaming, dict)
    limits = streaming["streaming"]["store_limits"]
    assert isinstance(limits, dict)
    return limits


def test_size_suffixes() -> None:
    binary = _limits(_parse("syntax_size_binary_suffixes"))["channels"]
    assert binary == {
        "b01": {"max_bytes": 10 * 1024},
        "b02": {"max_bytes": 10 * 1024},
        "b03": {"max_bytes": 10 * 1024},
        "b04": {"max_bytes": 10 * 1024},
        "b05": {"max_bytes": 2 * 1024**2},
        "b06": {"max_bytes": 2 * 1024**2},
        "b07": {"max_bytes": 2 * 1024**2},
        "b08": {"max_bytes": 3 * 1024**3},
        "b09": {"max_bytes": 3 * 1024**3},
        "b10": {"max_bytes": 1024**4},
        "b11": {"max_bytes": 1024**5},
        "b12": {"max_bytes": 1024**6},
    }
    decimal = _limits(_parse("syntax_size_decimal_suffixes"))["channels"]
    assert isinstance(decimal, dict)
    assert [v["max_bytes"] for v in decimal.values()] == [
        10**4, 10**4, 2 * 10**6, 2 * 10**6, 3 * 10**9, 3 * 10**9, 10**12, 10**12, 10**15, 10**18,
    ]  # fmt: skip


def test_var_top_level() -> None:
    tree = _parse("syntax_var_top_level")
    assert plain(tree)["streaming"] == {  # type: ignore[index]
        "cluster_id": "from-variable",
        "store_limits": {"max_msgs": 250, "max_subs": 15},
    }
    cid, limit = tree.get("CID"), tree.get("LIMIT")
    assert cid is not None and cid.used_as_variable
    assert limit is not None and limit.used_as_variable
    streaming = tree.get("streaming")
    assert streaming is not None and not streaming.used_as_variable
    cluster_id = streaming.node.get("cluster_id")
    assert cluster_id is not None
    assert (cluster_id.node.pos.line, cluster_id.node.pos.col) == (4, 15)  # the $CID


def test_strings_and_keys() -> None:
    tree = plain(_parse("syntax_string_escapes"))
    assert tree == {
        "streaming": {"sd": True, "cluster_id": "raw\\tvalue", "discover_prefix": "escAB\\z"}
    }
    keys = _limits(_parse("syntax_quoted_keys"))
    assert keys == {
        "max_msgs": 100,
        "channels": {
            "with.dots": {"max_msgs": 5},
            "single.quoted": {"max_subs": 3},
            "plain.unquoted": {"max_bytes": 1024},
        },
    }


def test_separators_comments_durations() -> None:
    assert _limits(_parse("syntax_separators_mixed")) == {
        "max_msgs": 500,
        "max_subs": 20,
        "max_channels": 30,
        "max_age": "1h",
        "channels": {
            "orders": {"max_msgs": 10},
            "audit.>": {"max_bytes": 64 * 1024},
            "logs": {"max_subs": 3, "max_msgs": 4},
        },
    }
    assert _limits(_parse("syntax_comments")) == {
        "max_msgs": 42,
        "channels": {"news.>": {"max_age": "1h"}},
    }
    assert _limits(_parse("syntax_duration_unquoted_ok")) == {
        "max_age": "1h30m",
        "max_inactivity": "45s",
        "channels": {"unquoted": {"max_age": "2h"}},
    }


def test_bools_and_datetime() -> None:
    sd = _parse("syntax_bool_yes").get("streaming")
    assert sd is not None
    yes = sd.node.get("sd")
    assert yes is not None and (yes.node.kind, yes.node.value, yes.node.raw) == (
        Kind.BOOL,
        True,
        "yes",
    )
    quoted = _parse("syntax_bool_quoted").get("streaming")
    assert quoted is not None
    true = quoted.node.get("sd")
    assert true is not None and (true.node.kind, true.node.quoted) == (Kind.STRING, True)
    dt = _parse("err_datetime_value").get("streaming")
    assert dt is not None
    cid = dt.node.get("cluster_id")
    assert cid is not None and cid.node.kind is Kind.DATETIME


def test_case_insensitive_lookup() -> None:
    tree = _parse("syntax_case_insensitive_keys")
    assert tree.get("streaming") is None
    streaming = tree.get("streaming", casefold=True)
    assert streaming is not None and streaming.key == "STREAMING"
    limits = streaming.node.get("store_limits", casefold=True)
    assert limits is not None and limits.key == "STORE_LIMITS"


def test_includes() -> None:
    top = _parse("syntax_include_top")
    assert plain(top) == {
        "streaming": {"cluster_id": "included", "store_limits": {"max_msgs": 321}}
    }
    streaming = top.get("streaming")
    assert streaming is not None
    assert str(streaming.key_pos) == str(CONFORMANCE / "inc" / "top_block.inc") + ":1:1"

    nested = _parse("syntax_include_nested_dir")
    assert plain(nested) == {
        "streaming": {"cluster_id": "nested-include", "store_limits": {"max_channels": 3}}
    }
    block = nested.get("streaming")
    assert block is not None
    inner = block.node.get("store_limits")
    assert inner is not None
    assert inner.key_pos.file == str(CONFORMANCE / "inc" / "nested_inner.inc")
    assert (inner.key_pos.line, inner.key_pos.col) == (1, 1)


def test_block_hides_top_level() -> None:
    tree = plain(_parse("syntax_block_hides_top_level"))
    assert tree == {
        "cluster_id": "ignored-top",
        "store_limits": {"max_msgs": 1},
        "streaming": {"store_limits": {"max_subs": 2}},
    }
