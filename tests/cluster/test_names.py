"""Names in JetStream for any cluster ID and channel: valid and distinct (KV keys:
tests/stores/jetstream/test_records_map.py; the whole layout: test_layout.py there)."""

from __future__ import annotations

import re

from stanpkg.stores.jetstream.layout import (
    channel_subject,
    legacy_stream_name,
    shared_stream_name,
)
from stanpkg.stores.jetstream.store import ClusterSettings

STREAM = re.compile(r"^[^.*>\s/\\]+$")


def test_stream_names_are_valid_and_distinct() -> None:
    names = {shared_stream_name(cid, k) for cid in ("c", "c.d", "c_d", "c d") for k in (0, 15)}
    assert len(names) == 8
    for name in names:
        assert STREAM.match(name) and len(name) <= 255
    legacy = {legacy_stream_name(cid, ch) for cid in ("c", "c.d") for ch in ("a.b", "a_b")}
    assert len(legacy) == 4 and all(STREAM.match(name) for name in legacy)


def test_channel_subject_names_the_cluster_the_stream_and_the_channel() -> None:
    assert channel_subject("my-cluster", 3, "orders.new") == "_STAN.ch.my-cluster.3.orders.new"
    # A cluster ID that is not one plain token is encoded, so IDs that read alike differ.
    assert channel_subject("a.b", 0, "x") != channel_subject("a_b", 0, "x")
    assert channel_subject("a.b", 0, "x").count(".") == channel_subject("a_b", 0, "x").count(".")


def test_state_buckets_of_ids_that_read_alike_differ() -> None:
    buckets = {ClusterSettings(cid, "a", (), 1, 4.0).bucket for cid in ("a.b", "a_b", "a b")}
    assert len(buckets) == 3
    assert ClusterSettings("test-cluster", "a", (), 1, 4.0).bucket == "STAN_test-cluster_state"
    long_id = ClusterSettings("x" * 200, "a", (), 1, 4.0).bucket
    assert len(long_id) < 80


def test_state_bucket_names_are_valid() -> None:
    settings = ClusterSettings("we ird.id", "a", (), 1, 4.0)
    assert re.match(r"^[a-zA-Z0-9_-]+$", settings.bucket)
