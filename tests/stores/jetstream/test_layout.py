"""The shared-stream layout's names, subjects, keys and records, without JetStream: valid
for any cluster ID and channel, distinct, stable, and the records read back as written."""

from __future__ import annotations

import hashlib
import re

import pytest

from stanpkg.plan.options import OPTIONS
from stanpkg.stores.base import ServerInfo, StoreError
from stanpkg.stores.jetstream.layout import (
    DEFAULT_CHANNEL_STREAMS,
    LAYOUT_KEY,
    MAX_CHANNEL_STREAMS,
    channel_key,
    channel_stream_index,
    channel_subject,
    kv_key,
    legacy_moved_subject,
    legacy_overlaps,
    legacy_stream_name,
    legacy_stream_subject,
    records_bucket,
    shared_stream_name,
    shared_stream_prefix,
    shared_stream_subjects,
    state_key,
)
from stanpkg.stores.jetstream.record_codec import (
    ChannelState,
    Layout,
    channel_record,
    decode_records,
    layout_record,
    server_record,
    state_record,
)

_VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
CLUSTERS = ["c", "a.b", "a_b", "a b", "a*b", "a>b", "a/b\\c", "ü", "", "x" * 300, "=x", "c_ch1"]
CHANNELS = ["foo", "foo.bar", "foo_bar", "föö", "f" * 500, "a.b.c", "_STAN.pub.x", "3.x"]


def test_shared_stream_names_are_valid_distinct_and_readable() -> None:
    names = {shared_stream_name(c, k) for c in CLUSTERS for k in (0, 1, 15, 999)}
    assert len(names) == len(CLUSTERS) * 4
    assert all(_VALID_NAME.fullmatch(name) for name in names)
    assert shared_stream_name("my-cluster", 3) == "STAN_my-cluster_ch3"
    assert shared_stream_name("a.b", 0).startswith("STAN_a_b_")
    # the cluster part is the records bucket's
    assert records_bucket("a.b") == shared_stream_name("a.b", 0).replace("_ch0", "_state")
    # a layout-1 stream name never reads as a shared one
    assert not {legacy_stream_name(c, ch) for c in CLUSTERS for ch in CHANNELS} & names


def test_channel_subjects_name_the_cluster_the_stream_and_the_channel() -> None:
    assert channel_subject("my-cluster", 3, "orders.new") == "_STAN.ch.my-cluster.3.orders.new"
    assert shared_stream_subjects("my-cluster", 3) == "_STAN.ch.my-cluster.3.>"
    assert shared_stream_prefix("my-cluster", 3) == "_STAN.ch.my-cluster.3."
    subjects = {channel_subject(c, k, ch) for c in CLUSTERS for k in (0, 7) for ch in CHANNELS}
    assert len(subjects) == len(CLUSTERS) * 2 * len(CHANNELS)
    for subject in subjects:
        tokens = subject.split(".")
        assert tokens[:2] == ["_STAN", "ch"] and all(tokens)
        assert not any(ch in subject for ch in " \t*>")
    # A cluster ID that is not one plain token is encoded, so IDs that read alike differ.
    assert channel_subject("a.b", 0, "x") != channel_subject("a_b", 0, "x")


def test_a_channels_stream_is_a_stable_hash_of_its_name() -> None:
    for channel in CHANNELS:
        digest = hashlib.sha256(channel.encode()).digest()
        for streams in (1, 16, 1000):
            index = channel_stream_index(channel, streams)
            assert index == int.from_bytes(digest[:8], "big") % streams
            assert 0 <= index < streams
    # Known values: the same in every release and on every node.
    assert channel_stream_index("orders", 16) == channel_stream_index("orders", 16)
    spread = {channel_stream_index(f"channel-{n}", 16) for n in range(200)}
    assert spread == set(range(16))


def test_the_option_default_is_the_layouts() -> None:
    (option,) = [o for o in OPTIONS if o.path == "cluster.channel_streams"]
    assert option.default == DEFAULT_CHANNEL_STREAMS
    assert (option.minimum, option.maximum) == (1, MAX_CHANNEL_STREAMS)
    assert option.flags == ("--cluster_channel_streams",)


def test_layout_one_names_are_kept_for_the_conversion() -> None:
    assert legacy_stream_subject("my-cluster", "orders.new") == "_STAN.ch.my-cluster.orders.new"
    assert legacy_stream_name("c", "foo.bar").startswith("STAN_c_foo_bar_")
    assert legacy_moved_subject("c", "3.x") == "_STAN.v1.c.3.x"
    assert legacy_overlaps("3.x", 16) and legacy_overlaps("0.a.b", 1)
    assert not legacy_overlaps("3", 16)  # one token: not under _STAN.ch.c.3.>
    assert not legacy_overlaps("16.x", 16) and not legacy_overlaps("03.x", 16)
    assert not legacy_overlaps("orders.3", 16)


def test_records_round_trip() -> None:
    info = ServerInfo.for_cluster("c", "_STAN.discover")
    records = dict(
        [
            server_record(info),
            layout_record(16),
            channel_record("orders", 5),
            channel_record("a.b", 0),
            (channel_key("old"), b""),  # layout 1
            state_record("orders", ChannelState(3, 120, 8, 10)),
        ]
    )
    assert records[channel_key("orders")] == b'{"stream": 5}'
    assert LAYOUT_KEY == "layout" and state_key("a.b") == kv_key("state", "a.b")
    decoded = decode_records(records)
    assert decoded is not None
    assert decoded.layout == Layout(2, 16)  # no packs written
    assert decode_records({**records, **dict([layout_record(16, packs=True)])}).layout == Layout(
        3, 16
    )
    assert decoded.channels == {"a.b": 0, "old": None, "orders": 5}
    assert decoded.legacy == ["old"]
    assert decoded.states == {"orders": ChannelState(3, 120, 8, 10)}


def test_a_layout_this_release_does_not_know_is_refused() -> None:
    info = ServerInfo.for_cluster("c", "_STAN.discover")
    records = dict([server_record(info), (LAYOUT_KEY, b'{"version": 4, "channel_streams": 4}')])
    with pytest.raises(StoreError, match="layout 4"):
        decode_records(records)
    with pytest.raises(StoreError, match="unreadable"):
        decode_records({**records, channel_key("x"): b"{not json"} | dict([layout_record(1)]))
