"""``stanpkg diff OLD NEW`` on real configurations: resolved plans compared (not texts),
options named by the table with where the new value is set, channels' effective limits
after inheritance, and the exit statuses 0 / 1 / 3 / 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stanpkg.cli import main

BASE = """\
store: file
dir: "{data}"
hb_interval: "30s"
store_limits: {
  max_msgs: 1000
  channels: {
    "orders.>": { max_bytes: 10MB }
    "orders.eu": { max_subs: 50 }
    "audit": { max_age: "720h" }
  }
}
"""


@pytest.fixture
def confs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "old.conf").write_text(BASE.replace("{data}", str(tmp_path / "data")))
    return tmp_path


def write(root: Path, name: str, text: str) -> str:
    (root / name).write_text(text.replace("{data}", str(root / "data")))
    return name


def diff(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["diff", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def diff_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    status = main(["diff", "--format", "json", *args])
    return status, json.loads(capsys.readouterr().out)


def test_the_same_plan_written_differently_is_equal(
    confs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Aliases, another layout, a streaming block, an include, a size in another unit.
    write(
        confs,
        "limits.conf",
        'channels { "orders.>": { mb: 10485760 }, "orders.eu": { msu: 50 }, '
        '"audit": { ma: "720h" } }\n',
    )
    write(
        confs,
        "new.conf",
        'streaming {\n  hbi: "30s"\n  store_type: "FILE"\n  dir: "{data}"\n'
        '  limits { mm: 1000, include "limits.conf" }\n}\n',
    )
    status, out, _ = diff(capsys, "old.conf", "new.conf")
    assert status == 0, out
    assert out == "old.conf and new.conf: the plans are equal\n"
    assert diff_json(capsys, "old.conf", "new.conf") == (
        0,
        {
            "valid": True,
            "equal": True,
            "dangerous": False,
            "options": [],
            "channels": [],
            "notes": [],
        },
    )


def test_changes_with_both_values_and_where_the_new_one_is_set(
    confs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BASE.replace('hb_interval: "30s"', 'hb_interval: "10s"').replace("1000\n", "5000\n")
    write(confs, "new.conf", text)
    status, out, _ = diff(capsys, "old.conf", "new.conf")
    assert status == 1, out  # nothing lowered
    lines = out.splitlines()
    assert "hb_interval: 30s -> 10s  (set at new.conf:3:14)" in lines
    assert "store_limits.max_msgs: 1000 -> 5000  (set at new.conf:5:13)" in lines
    # every channel whose effective max_msgs changes (all inherit it), same position
    for channel in ("orders.>", "orders.eu", "audit"):
        index = lines.index(f'channel "{channel}":')
        assert lines[index + 1] == "    max_msgs: 1000 -> 5000  (set at new.conf:5:13)"
    assert "can drop data" not in out
    assert lines[-1] == "old.conf -> new.conf: 5 changes"


def test_a_lowered_parent_limit_reaches_its_children(
    confs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = BASE.replace("{ max_bytes: 10MB }", '{ max_bytes: 10MB, max_age: "1h" }')
    write(confs, "new.conf", text)
    status, out, _ = diff(capsys, "old.conf", "new.conf")
    assert status == 3, out
    lines = out.splitlines()
    index = lines.index('channel "orders.eu":')
    assert lines[index + 1] == "    max_age: unlimited -> 1h0m0s  (set at new.conf:7:45)"
    assert lines[index + 2] == (
        '        can drop data: channel "orders.eu" keeps messages for 1h0m0s: older ones are '
        "removed at the next start"
    )
    assert lines[-1] == "old.conf -> new.conf: 2 changes, 2 can drop stored data or subscriptions"
    status, doc = diff_json(capsys, "old.conf", "new.conf")
    assert status == 3 and doc["dangerous"] is True
    (parent, child) = doc["channels"]
    assert parent["channel"] == "orders.>" and child["channel"] == "orders.eu"
    assert child["limits"] == [
        {
            "limit": "max_age",
            "old": 0,
            "new": 3_600_000_000_000,
            "old_text": "unlimited",
            "new_text": "1h0m0s",
            "set_at": {"file": "new.conf", "line": 7, "column": 45},
            "danger": 'channel "orders.eu" keeps messages for 1h0m0s: older ones are removed '
            "at the next start",
        }
    ]


def test_a_channel_dropped_from_the_configuration_inherits(
    confs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(confs, "new.conf", BASE.replace('    "audit": { max_age: "720h" }\n', ""))
    status, out, _ = diff(capsys, "old.conf", "new.conf")
    assert status == 1, out  # unlimited age is no loss
    assert 'channel "audit" (no longer configured: inherits):' in out
    assert "    max_age: 720h0m0s -> unlimited  (set at default)" in out


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("max_subs: 50 }", "max_subs: 5 }", 'channel "orders.eu" accepts no new subscription'),
        ("max_msgs: 1000\n", "max_msgs: 10\n", "a channel without its own limit keeps at most 10"),
        ("max_msgs: 1000\n", "max_msgs: 1000\n  max_channels: 2\n", "creates no new channel"),
        ("store: file", "store: memory", "the FILE store holds are not in the MEMORY store"),
        ('dir: "{data}"', 'dir: "{data}/other"', "does not hold what was stored in"),
        ("store: file", 'store: file\ncluster_id: "other"', "refuses to start"),
        ("store: file", "store: file\nmax_inactivity: x", "is deleted, with its messages"),
    ],
)
def test_data_dropping_changes_say_why(
    confs: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, reason: str
) -> None:
    text = BASE.replace(old, new)
    if "max_inactivity" in new:
        text = BASE.replace("max_msgs: 1000\n", 'max_msgs: 1000\n  max_inactivity: "1h"\n')
    write(confs, "new.conf", text)
    status, out, err = diff(capsys, "old.conf", "new.conf")
    assert status == 3, out + err
    assert reason in out


def test_partitioning(confs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write(confs, "p1.conf", BASE.replace("store: file", "store: file\npartitioning: true"))
    status, out, _ = diff(capsys, "old.conf", old)
    assert status == 3 and "partitioning on: this server serves only the channels" in out
    new = write(
        confs,
        "p2.conf",
        BASE.replace("store: file", "store: file\npartitioning: true").replace(
            '    "audit": { max_age: "720h" }\n', ""
        ),
    )
    status, out, _ = diff(capsys, old, new)
    assert status == 3
    assert 'this server no longer serves "audit" (partitioning)' in out
    # orders.eu leaves the list but orders.> still covers it: still served
    new = write(
        confs,
        "p3.conf",
        BASE.replace("store: file", "store: file\npartitioning: true").replace(
            '    "orders.eu": { max_subs: 50 }\n', ""
        ),
    )
    status, out, _ = diff(capsys, old, new)
    assert "no longer serves" not in out and "partitioning" not in out


def test_secrets_are_compared_but_never_shown(
    confs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(confs, "e1.conf", BASE + 'encrypt: true\nencryption_key: "first-secret"\n')
    new = write(confs, "e2.conf", BASE + 'encrypt: true\nencryption_key: "second-secret"\n')
    status, out, _ = diff(capsys, old, new)
    assert status == 3
    assert "encryption_key: <redacted> -> <redacted>  (set at e2.conf:13:17)" in out
    assert "cannot be decrypted" in out and "secret" not in out.replace("<redacted>", "")
    status, doc = diff_json(capsys, old, new)
    assert "first-secret" not in json.dumps(doc) and "second-secret" not in json.dumps(doc)
    # turning encryption on loses nothing
    status, out, _ = diff(capsys, "old.conf", new)
    assert status == 1, out


def test_flags_apply_to_both_and_are_named(confs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(confs, "new.conf", BASE.replace("1000\n", "5000\n"))
    status, out, _ = diff(capsys, "-mm", "7", "old.conf", "new.conf")
    assert (status, out) == (0, "old.conf and new.conf: the plans are equal\n")
    status, out, _ = diff(capsys, "old.conf", "new.conf", "--hb_interval", "5s")
    assert status == 1 and "hb_interval" not in out


def test_invalid_configuration_and_usage(confs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(confs, "bad.conf", BASE.replace("1000\n", "-1\n"))
    status, out, err = diff(capsys, "old.conf", "bad.conf")
    assert status == 2 and out == ""
    assert "bad.conf:5:13: error: max messages limit cannot be negative (-1)" in err
    assert err.splitlines()[-1] == "bad.conf: invalid: 1 error"
    status, doc = diff_json(capsys, "old.conf", "bad.conf")
    assert status == 2 and doc["valid"] is False and doc["invalid"][0]["file"] == "bad.conf"
    write(confs, "warn.conf", BASE + "max_msg: 3\n")
    assert diff(capsys, "old.conf", "warn.conf")[0] == 0  # an ignored key changes no plan
    assert diff(capsys, "--strict", "old.conf", "warn.conf")[0] == 2
    for args in (["old.conf"], ["a", "b", "c"], ["--format", "sarif", "a", "b"], ["-x", "a", "b"]):
        status, out, err = diff(capsys, *args)
        assert status == 2 and err.startswith("stanpkg: ") and err.count("\n") == 1


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: stanpkg diff [--strict] [--format text|json] [server flags] OLD")
    assert "3 different and a change can drop stored data" in out
