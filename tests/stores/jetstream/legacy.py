"""A cluster in layout 1 (a stream per channel), written by hand as the stream-per-channel
release wrote it: the stream's name, subject and configuration, the messages' headers
(STAN sequence = stream sequence, ``Nats-Msg-Id``, ``Stan-Timestamp``, ``Stan-Reply``) and
the records (a channel's record empty). tests/stores/jetstream/fixtures/ holds a cluster
written by that release itself."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from stanpkg.stores.base import ServerInfo, SubRecord
from stanpkg.stores.jetstream.connection import Pipeline, js_api
from stanpkg.stores.jetstream.layout import (
    channel_key,
    legacy_stream_name,
    legacy_stream_subject,
    records_bucket,
)
from stanpkg.stores.jetstream.record_codec import server_record, subscription_record
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.transport.connection import NatsConnection
from tests.server.conftest import start_nats_process
from tests.stores.jetstream.conftest import NatsProc

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHUNK = 1000


def legacy_stream_config(cluster_id: str, channel: str, first_seq: int = 1) -> dict[str, Any]:
    """The configuration the stream-per-channel release gave a channel without limits."""
    config: dict[str, Any] = {
        "name": legacy_stream_name(cluster_id, channel),
        "description": f"STAN channel {channel} of cluster {cluster_id}",
        "subjects": [legacy_stream_subject(cluster_id, channel)],
        "retention": "limits",
        "storage": "file",
        "discard": "old",
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msgs_per_subject": -1,
        "num_replicas": 1,
        "duplicate_window": 120 * 10**9,
        "allow_direct": True,
        "allow_atomic": True,
    }
    if first_seq > 1:
        config["first_seq"] = first_seq
    return config


def legacy_payload(channel: str, sequence: int) -> bytes:
    return f"{channel}#{sequence}".encode()


async def write_legacy_channel(
    conn: NatsConnection, cluster_id: str, channel: str, count: int, *, first_seq: int = 1
) -> None:
    """The channel's stream holding ``count`` messages from ``first_seq`` (its payloads
    :func:`legacy_payload`, every third with a reply, timestamps 1000 * sequence); its
    record is :func:`write_legacy_records`'."""
    config = legacy_stream_config(cluster_id, channel, first_seq)
    answer = await js_api(conn, f"STREAM.CREATE.{config['name']}", config)
    assert "error" not in answer, answer
    subject = config["subjects"][0]
    pipeline = Pipeline(conn)
    last = first_seq + count - 1
    for start in range(first_seq, last + 1, CHUNK):
        writes = []
        for sequence in range(start, min(start + CHUNK, last + 1)):
            headers = {
                "Nats-Msg-Id": f"w0:{sequence}",  # the release's own IDs: per channel only
                "Stan-Timestamp": str(1000 * sequence),
                "Nats-Expected-Last-Sequence": str(sequence - 1),
            }
            if sequence % 3 == 0:
                headers["Stan-Reply"] = f"_INBOX.{sequence}"
            writes.append((subject, legacy_payload(channel, sequence), headers))
        results = await pipeline.publish_all(writes, timeout=10)
        assert results == list(range(start, start + len(writes))), results[:3]


async def write_legacy_records(
    conn: NatsConnection,
    cluster_id: str,
    channels: list[str],
    subs: dict[str, list[tuple[SubRecord, list[int]]]] | None = None,
) -> None:
    """The records of a layout-1 cluster: its server info, each channel's empty record,
    the subscriptions given."""
    records = await ReplicatedMap.open(conn, records_bucket(cluster_id), replicas=1)
    records.put(*server_record(ServerInfo.for_cluster(cluster_id, "_STAN.discover")))
    for channel in channels:
        records.put(channel_key(channel), b"")
    for channel, items in (subs or {}).items():
        for record, pending in items:
            records.put(*subscription_record(channel, record, pending))
    await records.flush()


def layout1_manifest() -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((FIXTURES / "layout1.json").read_text())
    return manifest


def start_layout1_fixture(tmp: Path) -> NatsProc:
    """A nats-server with JetStream on a copy of the fixture's store."""
    with tarfile.open(FIXTURES / "layout1.tar.gz") as tar:
        tar.extractall(tmp / "fixture", filter="data")
    name = layout1_manifest()["server_name"]
    conf = f'server_name: "{name}"\njetstream {{ store_dir: "{tmp / "fixture" / "js"}" }}\n'
    return start_nats_process(tmp / "nats", conf)
