"""Names in JetStream for any cluster ID and channel: valid and distinct (KV keys:
tests/stores/jetstream/test_kvmap.py)."""

from __future__ import annotations

import re

from stanpkg.stores.jetstream.layout import stream_name, stream_subject
from stanpkg.stores.jetstream.store import ClusterSettings

STREAM = re.compile(r"^[^.*>\s/\\]+$")


def test_stream_names_are_valid_and_distinct() -> None:
    names = {stream_name(cid, ch) for cid in ("c", "c.d", "c_d") for ch in ("a.b", "a_b", "a b")}
    assert len(names) == 9
    for name in names:
        assert STREAM.match(name) and len(name) <= 255


def test_stream_subject_names_the_cluster_and_the_channel() -> None:
    assert stream_subject("my-cluster", "orders.new") == "_STAN.ch.my-cluster.orders.new"
    # A cluster ID that is not one plain token is encoded, so IDs that read alike differ.
    assert stream_subject("a.b", "x") != stream_subject("a_b", "x")
    assert stream_subject("a.b", "x").count(".") == stream_subject("a_b", "x").count(".")


def test_state_buckets_of_ids_that_read_alike_differ() -> None:
    buckets = {ClusterSettings(cid, "a", (), 1, 4.0).bucket for cid in ("a.b", "a_b", "a b")}
    assert len(buckets) == 3
    assert ClusterSettings("test-cluster", "a", (), 1, 4.0).bucket == "STAN_test-cluster_state"
    long_id = ClusterSettings("x" * 200, "a", (), 1, 4.0).bucket
    assert len(long_id) < 80


def test_state_bucket_names_are_valid() -> None:
    settings = ClusterSettings("we ird.id", "a", (), 1, 4.0)
    assert re.match(r"^[a-zA-Z0-9_-]+$", settings.bucket)
