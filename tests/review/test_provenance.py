"""Where a resolved value was set, following the plan's own inheritance chain
(``ChannelLimits.parent_name``), and ``StoreLimits.entry_for``."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.review.provenance import SetAt, channel_limit_set_at, limit_set_at

CONF = """\
store_limits {
  max_msgs: 100
  channels {
    "a.>": { max_age: "1h" }
    "a.b.*": { max_subs: 5 }
    "a.b.c": {}
  }
}
"""


@pytest.fixture
def plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Plan:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stan.conf").write_text(CONF)
    result = compile_args(["stan.conf", "-mb", "5MB"], env={}, positional_config=True)
    assert result.plan is not None
    return result.plan


def test_the_entries_and_their_parents(plan: Plan) -> None:
    entries = {c.name: c.parent_name for c in plan.store_limits.channels}
    assert entries == {"a.>": "", "a.b.*": "a.>", "a.b.c": "a.b.*"}
    entry_for = plan.store_limits.entry_for
    assert [getattr(entry_for(n), "name", None) for n in ("a.b.c", "a.x", "a.b.z", "z")] == [
        "a.b.c",
        "a.>",
        "a.b.*",
        None,
    ]
    # an entry's own name finds itself; an absent wildcard name the entry it would inherit
    assert getattr(entry_for("a.b.*"), "name", None) == "a.b.*"
    assert getattr(entry_for("a.q.*"), "name", None) == "a.>"


def at(key: str) -> SetAt:
    """The position of the value of ``key`` in CONF."""
    for number, line in enumerate(CONF.splitlines(), 1):
        if f"{key}: " in line:
            return SetAt("file", f"stan.conf:{number}:{line.index(key) + len(key) + 3}")
    raise AssertionError(key)


def test_an_inherited_value_is_placed_where_it_is_written(plan: Plan) -> None:
    assert (
        limit_set_at(plan, "a.b.c", "max_age") == at("max_age") == SetAt("file", "stan.conf:4:23")
    )
    assert limit_set_at(plan, "a.b.c", "max_subs") == at("max_subs")
    assert limit_set_at(plan, "a.b.c", "max_msgs") == at("max_msgs")
    assert limit_set_at(plan, "a.b.c", "max_bytes") == SetAt("flag", "-mb")
    assert limit_set_at(plan, None, "max_inactivity") == SetAt("default")
    assert channel_limit_set_at(plan, "a.q.r", "max_age") == at("max_age")
    assert channel_limit_set_at(plan, "other", "max_age") == SetAt("default")


def test_how_a_source_is_shown() -> None:
    at = SetAt("file", "dir:with:colons/stan.conf:4:21")
    assert at.position is not None and at.position.file == "dir:with:colons/stan.conf"
    assert at.as_json() == {"file": "dir:with:colons/stan.conf", "line": 4, "column": 21}
    assert str(SetAt("flag", "-mb")) == "flag -mb" and SetAt("flag", "-mb").position is None
    assert SetAt("env", "X").as_json() == {"source": "env", "where": "X"}
    assert str(SetAt("default")) == "default" and SetAt("default").as_json() == {
        "source": "default"
    }
