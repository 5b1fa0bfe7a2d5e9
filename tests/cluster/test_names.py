"""Names in JetStream for any cluster ID and channel: valid and distinct (KV keys:
tests/stores/jetstream/test_kvmap.py)."""

from __future__ import annotations

import re

from stanpkg.stores.jetstream.channel_streams import stream_name, stream_subject
from stanpkg.stores.jetstream.store import ClusterSettings

STREAM = re.compile(r"^[^.*>\s/\\]+$")


def test_stream_names_are_valid_and_distinct() -> None:
    names = {stream_name(cid, ch) for cid in ("c", "c.d", "c_d") for ch in ("a.b", "a_b", "a b")}
    assert len(names) == 9
    for name in names:
        assert STREAM.match(name) and len(name) <= 255


def test_stream_subject_names_the_cluster_and_the_channel() -> None:
    assert stream_subject("my-cluster", "orders.new") == "_STAN.ch.my-cluster.orders.new"
    assert stream_subject("a.b", "x") == "_STAN.ch.a_b.x"


def test_state_bucket_names_are_valid() -> None:
    settings = ClusterSettings("we ird.id", "a", (), 1, 4.0)
    assert re.match(r"^[a-zA-Z0-9_-]+$", settings.bucket)
