"""Data source options: parsing, validation, key precedence, filter narrowing."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.pipeline.options import ChannelSelector, OptionError, ReadOptions, parse_time
from tests.pipeline.helpers import copy_fixture

KEY_ENV = "NATS_STREAMING_ENCRYPTION_KEY"


def test_path_is_required() -> None:
    with pytest.raises(OptionError, match="path"):
        ReadOptions.parse({}, environ={})


def test_unknown_option_is_named() -> None:
    with pytest.raises(OptionError, match="fromSeq".lower()):
        ReadOptions.parse({"path": "/x", "fromSeq": "3"}, environ={})


def test_option_names_are_case_insensitive() -> None:
    opts = ReadOptions.parse(
        {"PATH": "/x", "FromSequence": "3", "TOSEQUENCE": "9", "includeremoved": "TRUE"},
        environ={},
    )
    assert (opts.path, opts.from_sequence, opts.to_sequence) == ("/x", 3, 9)
    assert opts.include_removed and not opts.include_archived


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("fromSequence", "-1"),
        ("toSequence", "abc"),
        ("includeArchived", "maybe"),
        ("mode", "DROPEVERYTHING"),
        ("fromTime", "yesterday"),
        ("startingSequences", "[1,2]"),
        ("endingSequences", '{"a": "1"}'),
        ("channels", "a..b"),
        ("channels", "a.>.b"),
        ("channels", '["a", 1]'),
        ("batchRows", "0"),
    ],
)
def test_invalid_values_name_the_option(option: str, value: str) -> None:
    with pytest.raises(OptionError, match=option.lower()):
        ReadOptions.parse({"path": "/x", option: value}, environ={})


def test_channel_selector_nats_matching() -> None:
    sel = ChannelSelector.parse("orders.*, audit.>,exact")
    assert sel.matches("orders.created") and not sel.matches("orders.created.eu")
    assert sel.matches("audit.trail") and sel.matches("audit.trail.x") and not sel.matches("audit")
    assert sel.matches("exact") and not sel.matches("exactly")
    assert ChannelSelector.parse('["a.b", "c"]').patterns == ("a.b", "c")
    assert ChannelSelector.parse(None).matches("anything")
    assert ChannelSelector.parse(">").matches("x.y")


def test_channel_selector_pickles() -> None:
    import pickle

    sel = pickle.loads(pickle.dumps(ChannelSelector.parse("orders.*")))
    assert sel.matches("orders.x") and not sel.matches("payments.x")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000000000001", 1_700_000_000_000_000_001),
        ("2023-11-14T22:13:20Z", 1_700_000_000 * 10**9),
        ("2023-11-14T22:13:20", 1_700_000_000 * 10**9),
        ("2023-11-14T23:13:20.5+01:00", 1_700_000_000 * 10**9 + 500_000_000),
        ("2023-11-14", 1_699_920_000 * 10**9),
    ],
)
def test_parse_time(text: str, expected: int) -> None:
    assert parse_time(text) == expected


def test_sequence_range_combines_global_and_per_channel() -> None:
    opts = ReadOptions.parse(
        {
            "path": "/x",
            "fromSequence": "5",
            "toSequence": "50",
            "startingSequences": '{"a": 10}',
            "endingSequences": '{"b": 20}',
        },
        environ={},
    )
    assert opts.sequence_range("a") == (10, 50)
    assert opts.sequence_range("b") == (5, 20)


def test_config_supplies_dir_limits_crc_and_key(tmp_path: Path) -> None:
    copy = copy_fixture("aes", tmp_path)
    opts = ReadOptions.parse({"config": str(copy.config)}, environ={})
    assert opts.path == str(copy.datastore)
    assert opts.store_limits is not None
    assert opts.store_limits.for_channel("secure.orders").max_msgs == 8
    assert opts.store_limits.for_channel("other").max_msgs == 1_000_000  # the server's default
    assert opts.encryption_key == b"fixture-A-aes-3f9c1e7b52d04a86"
    assert opts.archive_dir == str(copy.datastore) + ".archive"


def test_key_precedence_option_then_env_then_config(tmp_path: Path) -> None:
    copy = copy_fixture("aes", tmp_path)
    base = {"config": str(copy.config)}
    env = {KEY_ENV: "from-env"}
    assert ReadOptions.parse(base, environ=env).encryption_key == b"from-env"
    with_option = {**base, "encryptionKey": "from-option"}
    assert ReadOptions.parse(with_option, environ=env).encryption_key == b"from-option"
    # Without a config, the environment variable alone gives the key (a reader's choice:
    # the server needs `encrypt` too, but a reader has no other way to be told).
    assert ReadOptions.parse({"path": "/x"}, environ=env).encryption_key == b"from-env"
    assert ReadOptions.parse({"path": "/x"}, environ={}).encryption_key is None


def test_bad_config_reports_diagnostics(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("streaming { store_limits { max_msgs: -5x } }\n")
    with pytest.raises(OptionError, match=r"config: .*bad\.conf"):
        ReadOptions.parse({"config": str(conf)}, environ={})


def test_archive_dir_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANPKG_ARCHIVE_DIR", str(tmp_path / "arch"))
    assert ReadOptions.parse({"path": "/x"}, environ={}).archive_dir == str(tmp_path / "arch")
    explicit = ReadOptions.parse({"path": "/x", "archiveDir": "/a"}, environ={})
    assert explicit.archive_dir == "/a"
