"""``stanpkg migrate`` into one real JetStream-enabled nats-server: the Go-written fixtures
keep their sequences and payloads (read back as a plain JetStream user reads them: each
channel a subject of one of the cluster's shared streams), the
source files stay as they were, damaged input is named or skipped, an interrupted run
resumes without writing a message twice, --verify and the conflict check catch a
destination that is not the source."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext

from stanpkg.migrate import destination as destination_module
from stanpkg.migrate.destination import Destination, DestinationError
from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.jetstream.layout import (
    DEFAULT_CHANNEL_STREAMS,
    channel_stream_index,
    channel_subject,
    kv_key,
    records_bucket,
    shared_stream_name,
)
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.stream_reader import ReplicaBehind
from stanpkg.transport.endpoint import NatsEndpoint
from tests.cluster.conftest import STANPKG
from tests.migrate.conftest import (
    EXIT_DIFFERENT,
    file_hashes,
    manifest_hashes,
    migrate_json,
    read_only_fixture,
    run_migrate,
)
from tests.pipeline.helpers import BASE_TS, TS_STEP, message_payload, write_store
from tests.server.conftest import new_cluster_id
from tests.transport.conftest import free_port

PROGRESS_JSON = ("--progress-every", "0.05", "--format", "json")


@contextlib.asynccontextmanager
async def jetstream(url: str) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(url)
    try:
        yield nc.jetstream()
    finally:
        await nc.close()


def where(cluster_id: str, channel: str) -> tuple[str, str]:
    """A migrated channel's subject and shared stream (a new cluster's layout)."""
    index = channel_stream_index(channel, DEFAULT_CHANNEL_STREAMS)
    return channel_subject(cluster_id, index, channel), shared_stream_name(cluster_id, index)


async def stream_messages(url: str, cluster_id: str, channel: str) -> list[dict[str, Any]]:
    """The channel as any JetStream client reads it: an ordered consumer on the channel's
    subject of its shared stream; the STAN fields, the sequence among them, from the
    headers, and a pack's messages from its protobuf (spb.MessagePack)."""
    subject, stream = where(cluster_id, channel)
    async with jetstream(url) as js:
        info = await js.stream_info(stream, subjects_filter=subject)
        count = (info.state.subjects or {}).get(subject, 0)
        found: list[dict[str, Any]] = []
        if count == 0:
            return found
        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
        for _ in range(count):  # stream messages: one, or a pack of several
            msg = await sub.next_msg(timeout=5)
            headers = msg.headers or {}
            if "Stan-Count" in headers:
                pack = spb.MessagePack.FromString(msg.data)
                first = int(headers["Stan-Sequence"])
                found += [
                    {
                        "sequence": first + i,
                        "reply": reply,
                        "data": data,
                        "timestamp_ns": str(stamp),
                    }
                    for i, (data, stamp, reply) in enumerate(
                        zip(pack.Data, pack.Timestamps, pack.Replies, strict=True)
                    )
                ]
                continue
            found.append(
                {
                    "sequence": int(headers["Stan-Sequence"]),
                    "reply": headers.get("Stan-Reply", ""),
                    "data": msg.data,
                    "timestamp_ns": str(headers["Stan-Timestamp"]),
                }
            )
        await sub.unsubscribe()
        return found


async def channel_figures(url: str, cluster_id: str, channel: str) -> tuple[int, int, int]:
    """(first, last, msgs) of a channel: its messages', else its figures' record."""
    messages = await stream_messages(url, cluster_id, channel)
    if messages:
        return messages[0]["sequence"], messages[-1]["sequence"], len(messages)
    async with jetstream(url) as js:
        kv = await js.key_value(records_bucket(cluster_id))
        figures = json.loads((await kv.get(kv_key("state", channel))).value or b"{}")
    return figures["first"], figures["last"], figures["msgs"]


def expected_messages(manifest: dict[str, Any], channel: str) -> list[dict[str, Any]]:
    return [
        {
            "sequence": m["sequence"],
            "reply": m["reply"],
            "data": base64.b64decode(m["data_b64"]),
            "timestamp_ns": m["timestamp_ns"],
        }
        for m in manifest["expected"]["messages"].get(channel, [])
    ]


@pytest.mark.parametrize("name", ["plain", "aes", "chacha", "expired"])
async def test_a_go_fixture_keeps_its_sequences_and_its_files(
    name: str, tmp_path: Path, jetstream_url: str
) -> None:
    copy = read_only_fixture(name, tmp_path)
    summary = migrate_json("--config", str(copy.config), "--nats", jetstream_url, "--verify")

    assert summary["verified"] is True
    cluster_id = copy.manifest["cluster_id"]
    assert summary["cluster_id"] == cluster_id
    expected = {c["name"]: c for c in copy.manifest["expected"]["channels"]}
    assert [c["name"] for c in summary["channels"]] == sorted(expected)
    for channel, want in expected.items():
        assert await channel_figures(jetstream_url, cluster_id, channel) == (
            want["first_seq"],
            want["last_seq"],
            want["msgs"],
        ), channel
    for channel in expected:
        assert await stream_messages(jetstream_url, cluster_id, channel) == expected_messages(
            copy.manifest, channel
        )
    # Read-only: every file as the Go server left it.
    assert file_hashes(copy.datastore) == manifest_hashes(copy)


async def test_a_dry_run_writes_nothing_and_a_second_run_neither(
    tmp_path: Path, jetstream_url: str
) -> None:
    copy = read_only_fixture("plain", tmp_path)
    args = ("--config", str(copy.config), "--nats", jetstream_url)
    dry = migrate_json(*args, "--dry-run")
    assert [c["action"] for c in dry["channels"]] == ["create", "create", "create"]
    assert [c["to_write"] for c in dry["channels"]] == [7, 10, 7]  # read through
    async with jetstream(jetstream_url) as js:
        assert await js.streams_info() == []
    migrate_json(*args)
    again = migrate_json(*args, "--verify")
    assert [c["action"] for c in again["channels"]] == ["done", "done", "done"]
    assert again["figures"]["messages"] == 0
    assert again["verified"] is True


def test_a_cut_record_is_named_by_file_and_offset(tmp_path: Path, jetstream_url: str) -> None:
    copy = read_only_fixture("truncated", tmp_path)
    done = run_migrate("--config", str(copy.config), "--nats", jetstream_url)
    assert done.returncode == 1, done.stdout
    assert "unexpected EOF" in done.stderr
    assert f'file "{copy.datastore}/ticks.cpu/msgs.2.dat", offset 3133' in done.stderr


async def test_permissive_skips_the_cut_record_and_lists_it(
    tmp_path: Path, jetstream_url: str
) -> None:
    copy = read_only_fixture("truncated", tmp_path)
    summary = migrate_json(
        "--config", str(copy.config), "--nats", jetstream_url, "--permissive", "--verify"
    )
    assert summary["verified"] is True
    assert summary["skipped_records"] == [
        f'unexpected EOF (file "{copy.datastore}/ticks.cpu/msgs.2.dat", offset 3133)'
    ]
    # What the reference serves after -file_truncate_bad_eof.
    for want in copy.manifest["expected"]["channels"]:
        got = await stream_messages(jetstream_url, "trunc-east", want["name"])
        assert [m["sequence"] for m in got] == list(range(want["first_seq"], want["last_seq"] + 1))
        assert got == expected_messages(copy.manifest, want["name"])
    assert file_hashes(copy.datastore) == manifest_hashes(copy)


def test_an_unreadable_config_or_store_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "stan.conf"
    missing.write_text(f'streaming {{ id: "x", store: "file", dir: "{tmp_path / "none"}" }}\n')
    done = run_migrate("--config", str(missing), "--nats", "nats://127.0.0.1:1")
    assert done.returncode == 1
    assert "datastore directory not found" in done.stderr
    memory = tmp_path / "memory.conf"
    memory.write_text('streaming { id: "x", store: "memory" }\n')
    done = run_migrate("--config", str(memory), "--nats", "nats://127.0.0.1:1")
    assert done.returncode == 1
    assert "reads FILE stores" in done.stderr


def test_no_jetstream_at_the_url_is_an_error(tmp_path: Path) -> None:
    copy = read_only_fixture("plain", tmp_path)
    done = run_migrate("--config", str(copy.config), "--nats", "nats://127.0.0.1:1")
    assert done.returncode == 1
    assert "nats://127.0.0.1:1" in done.stderr


@pytest.mark.slow
async def test_an_interrupted_run_resumes_and_writes_each_message_once(
    tmp_path: Path, jetstream_url: str
) -> None:
    count = 60_000
    root = write_store(tmp_path / "big", {"ticks": count}, slice_max_msgs=20_000)
    config = tmp_path / "big.conf"
    config.write_text(f'streaming {{ id: "pipe-test", store: "file", dir: "{root}" }}\n')
    proc = subprocess.Popen(
        [*STANPKG, "migrate", "--config", str(config), "--nats", jetstream_url, *PROGRESS_JSON],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # killed at its first progress line with messages written
        if json.loads(line)["progress"]["messages"] > 0:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    subject, stream = where("pipe-test", "ticks")
    async with jetstream(jetstream_url) as js:
        headers = (await js.get_last_msg(stream, subject)).headers or {}
        partial = int(headers["Stan-Sequence"]) + int(headers.get("Stan-Count", 1)) - 1
    assert 0 < partial < count

    summary = migrate_json("--config", str(config), "--nats", jetstream_url, "--verify")
    (channel,) = summary["channels"]
    assert channel["action"] == "resume"
    assert channel["from_seq"] == partial + 1
    assert channel["written"] == count - partial
    assert summary["verified"] is True
    assert await channel_figures(jetstream_url, "pipe-test", "ticks") == (1, count, count)


async def _rewrite_with(url: str, cluster_id: str, channel: str, changes: dict[int, bytes]) -> None:
    """Replace the channel's messages by the same ones except ``changes`` (sequence ->
    payload): JetStream alters no stored message, so the subject is purged and written
    again, as a plain JetStream client writes it."""
    messages = await stream_messages(url, cluster_id, channel)
    subject, stream = where(cluster_id, channel)
    async with jetstream(url) as js:
        await js.purge_stream(stream, subject=subject)
        for m in messages:
            headers = {"Stan-Sequence": str(m["sequence"]), "Stan-Timestamp": m["timestamp_ns"]}
            if m["reply"]:
                headers["Stan-Reply"] = m["reply"]
            data = changes.get(m["sequence"], m["data"])
            await js.publish(subject, data, stream=stream, headers=headers)


async def test_verify_names_an_altered_message(tmp_path: Path, jetstream_url: str) -> None:
    copy = read_only_fixture("plain", tmp_path)
    migrate_json("--config", str(copy.config), "--nats", jetstream_url)
    await _rewrite_with(jetstream_url, "ledger-east", "orders.created", {9: b"tampered"})

    done = run_migrate(
        "--config", str(copy.config), "--nats", jetstream_url, "--verify", "--dry-run"
    )
    assert done.returncode == EXIT_DIFFERENT, done.stderr
    assert "verify orders.created: DIFFERENT" in done.stdout
    assert "sequence 9: data differ" in done.stdout
    assert "verify audit.trail: ok" in done.stdout


async def test_another_channel_of_the_same_name_is_refused_unless_replaced(
    tmp_path: Path, jetstream_url: str
) -> None:
    copy = read_only_fixture("plain", tmp_path)
    migrate_json("--config", str(copy.config), "--nats", jetstream_url)
    await _rewrite_with(jetstream_url, "ledger-east", "audit.trail", {7: b"someone else's"})

    done = run_migrate("--config", str(copy.config), "--nats", jetstream_url)
    assert done.returncode == 1
    assert "channel 'audit.trail': the destination holds a different channel" in done.stderr
    assert "its message 7 is not the source's" in done.stderr

    summary = migrate_json(
        "--config", str(copy.config), "--nats", jetstream_url, "--replace", "--verify"
    )
    actions = {c["name"]: c["action"] for c in summary["channels"]}
    assert actions == {
        "audit.trail": "replace",
        "orders.created": "done",
        "payments.settled": "done",
    }
    assert summary["verified"] is True


def test_written_payloads_match_the_writer(tmp_path: Path, jetstream_url: str) -> None:
    """A store written by stanpkg (replies every 5th message) round-trips too."""
    root = write_store(tmp_path / "own", {"a.b": 12}, slice_max_msgs=5)
    config = tmp_path / "own.conf"
    config.write_text(f'streaming {{ id: "pipe-test", store: "file", dir: "{root}" }}\n')
    migrate_json("--config", str(config), "--nats", jetstream_url)
    got = asyncio.run(stream_messages(jetstream_url, "pipe-test", "a.b"))
    assert [(m["sequence"], m["data"], m["reply"], m["timestamp_ns"]) for m in got] == [
        (
            seq,
            message_payload("a.b", seq),
            f"a.b.reply.{seq}" if seq % 5 == 0 else "",
            str(BASE_TS + seq * TS_STEP),
        )
        for seq in range(1, 13)
    ]


async def test_another_cluster_id_names_the_streams_and_the_records(
    tmp_path: Path, jetstream_url: str
) -> None:
    copy = read_only_fixture("plain", tmp_path)
    summary = migrate_json(
        "--config", str(copy.config), "--nats", jetstream_url, "--cluster-id", "ledger-west"
    )
    assert summary["cluster_id"] == "ledger-west"
    async with jetstream(jetstream_url) as js:
        names = sorted([info.config.name for info in await js.streams_info()])
        assert names == sorted(
            ["KV_STAN_ledger-west_state"]
            + [f"STAN_ledger-west_ch{index}" for index in range(DEFAULT_CHANNEL_STREAMS)]
        )
        kv = await js.key_value("STAN_ledger-west_state")
        info = spb.ServerInfo.FromString((await kv.get("server")).value or b"")
        assert info.ClusterID == "ledger-west"
        assert info.Discovery == "_STAN.discover.ledger-west"
        keys = sorted(await kv.keys())
        channels = [kv_key("channel", c["name"]) for c in summary["channels"]]
        figures = [kv_key("state", c["name"]) for c in summary["channels"]]
        assert set(channels) | set(figures) <= set(keys)
        assert {"server", "layout", kv_key("client", "svc-alpha")} <= set(keys)
        assert len([k for k in keys if k.startswith("sub.")]) == 4
        record = json.loads((await kv.get(channels[0])).value or b"")
        index = channel_stream_index(summary["channels"][0]["name"], DEFAULT_CHANNEL_STREAMS)
        assert record == {"stream": index}


async def test_channels_selects_by_name_and_wildcard(tmp_path: Path, jetstream_url: str) -> None:
    copy = read_only_fixture("plain", tmp_path)
    summary = migrate_json(
        "--config", str(copy.config), "--nats", jetstream_url, "--channels", "orders.*,audit.trail"
    )
    assert [c["name"] for c in summary["channels"]] == ["audit.trail", "orders.created"]
    async with jetstream(jetstream_url) as js:
        kv = await js.key_value(records_bucket("ledger-east"))
        keys = set(await kv.keys())
    assert kv_key("channel", "payments.settled") not in keys
    assert kv_key("channel", "orders.created") in keys
    assert await stream_messages(jetstream_url, "ledger-east", "payments.settled") == []


async def test_keep_encrypted_copies_payloads_as_stored(tmp_path: Path, jetstream_url: str) -> None:
    copy = read_only_fixture("aes", tmp_path)
    summary = migrate_json(
        "--config", str(copy.config), "--nats", jetstream_url, "--keep-encrypted", "--verify"
    )
    assert summary["verified"] is True
    got = await stream_messages(jetstream_url, "vault-aes-east", "secure.audit")
    plain = expected_messages(copy.manifest, "secure.audit")
    assert [m["sequence"] for m in got] == [m["sequence"] for m in plain]
    for stored, clear in zip(got, plain, strict=True):
        if clear["data"]:  # only non-empty payloads are encrypted
            assert stored["data"][0] == copy.manifest["encryption"]["cipher_code"]
            assert stored["data"] != clear["data"]


async def test_a_replica_catching_up_is_read_again_then_named(
    jetstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster that has just started may answer the records' read from a replica still
    applying its leader's writes: migrate reads again, and names the replica if it stays
    behind past its budget."""
    real_load = ReplicatedMap.load
    behind = ReplicaBehind("the cluster state read here ends at 0, its leader has 1")
    calls: list[int] = []

    async def load_behind(self: ReplicatedMap, leader_timeout: float = 5.0) -> dict[str, bytes]:
        calls.append(1)
        if len(calls) <= 2:
            raise behind
        return await real_load(self, leader_timeout)

    monkeypatch.setattr(ReplicatedMap, "load", load_behind)
    destination = await Destination.open(NatsEndpoint(jetstream_url), "catching-up", None)
    try:
        assert await destination.open_state() == {}
        assert len(calls) == 3
    finally:
        await destination.close()

    async def always_behind(self: ReplicatedMap, leader_timeout: float = 5.0) -> dict[str, bytes]:
        raise behind

    monkeypatch.setattr(ReplicatedMap, "load", always_behind)
    monkeypatch.setattr(destination_module, "READY_TIMEOUT", 0.5)
    # The records exist now: the destination reads them (the cluster's layout) at once.
    with pytest.raises(DestinationError, match="read here ends at 0"):
        await Destination.open(NatsEndpoint(jetstream_url), "catching-up", None)


async def test_replicas_are_the_records_buckets_else_one_per_server_known(
    jetstream_url: str,
) -> None:
    """Without the cluster's records, one replica per server the connection knows of (a
    listed one that is down counts: it may come back); with them, their bucket's."""
    cluster_id = new_cluster_id()
    endpoint = NatsEndpoint(f"nats://127.0.0.1:{free_port()},{jetstream_url}")
    destination = await Destination.open(endpoint, cluster_id, None)
    try:
        assert destination.replicas == 2
    finally:
        await destination.close()
    nc = await nats.connect(jetstream_url)
    try:
        bucket = records_bucket(cluster_id)
        await nc.jetstream().create_key_value(bucket=bucket, history=1, replicas=1, direct=True)
    finally:
        await nc.close()
    destination = await Destination.open(endpoint, cluster_id, None)
    try:
        assert destination.replicas == 1
    finally:
        await destination.close()
