"""Decode the reference datastores and compare with what the Go server reported."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from stanpkg.stores.base import SubRecord
from stanpkg.stores.file.format import (
    Datastore,
    MessageDecryptionError,
    SliceInfo,
    crc32_func,
    open_datastore,
    recover_slice,
)
from tests.stores.filestore_helpers import (
    datastore_dir,
    encryption_key,
    limits_from_manifest,
    manifest,
    tree_digest,
)

RECOVERABLE = ("plain", "aes", "chacha", "expired")


def _open(name: str) -> tuple[Datastore, dict[str, Any]]:
    m = manifest(name)
    ds = open_datastore(
        datastore_dir(name), encryption_key=encryption_key(m), limits=limits_from_manifest(m)
    )
    return ds, m


@pytest.fixture(scope="module", params=RECOVERABLE)
def recovered(request: pytest.FixtureRequest) -> tuple[Datastore, dict[str, Any]]:
    return _open(request.param)


def test_server_info_and_clients(recovered: tuple[Datastore, dict[str, Any]]) -> None:
    ds, m = recovered
    assert ds.cluster_id == m["cluster_id"] == m["expected"]["server"]["cluster_id"]
    assert ds.server_info is not None and ds.server_info.node_id == ""
    assert ds.server_info.publish == f"_STAN.pub.{m['cluster_id']}"
    expected = {c["id"]: c["hb_inbox"] for c in m["expected"]["clients"]}
    assert {cid: c.hb_inbox for cid, c in ds.clients.items()} == expected
    assert ds.log == []


def test_channel_extents(recovered: tuple[Datastore, dict[str, Any]]) -> None:
    ds, m = recovered
    assert sorted(ds.channels) == sorted(c["name"] for c in m["expected"]["channels"])
    for ch in m["expected"]["channels"]:
        info = ds.channel(ch["name"])
        got = (info.first_seq, info.last_seq, info.msg_count, info.total_bytes)
        assert got == (ch["first_seq"], ch["last_seq"], ch["msgs"], ch["bytes"]), ch["name"]
    server = m["expected"]["server"]
    assert sum(c.msg_count for c in ds.channels.values()) == server["total_msgs"]
    assert sum(c.total_bytes for c in ds.channels.values()) == server["total_bytes"]


def test_every_message(recovered: tuple[Datastore, dict[str, Any]]) -> None:
    ds, m = recovered
    for channel, expected in m["expected"]["messages"].items():
        got = list(ds.iter_messages(channel))
        assert [g.sequence for g in got] == [e["sequence"] for e in expected]
        for g, e in zip(got, expected, strict=True):
            assert g.subject == e["subject"]
            assert g.reply == e["reply"]
            assert g.data == base64.b64decode(e["data_b64"])
            assert len(g.data) == e["data_len"]
            assert g.timestamp == int(e["timestamp_ns"])
            assert g.redelivered is e["redelivered"]
            assert g.crc32 == 0
        # lookups by sequence agree with iteration
        for g in got[:: max(1, len(got) // 3)]:
            assert ds.get_message(channel, g.sequence) == g
        info = ds.channel(channel)
        assert ds.get_message(channel, info.first_seq - 1) is None
        assert ds.get_message(channel, info.last_seq + 1) is None


def _is_offline(sub: SubRecord, clients: set[str]) -> bool:
    if sub.is_durable and sub.qgroup and not sub.client_id:  # a durable queue group's shadow
        return True
    return bool(sub.durable_name) and (sub.is_closed or sub.client_id not in clients)


def test_subscriptions(recovered: tuple[Datastore, dict[str, Any]]) -> None:
    ds, m = recovered
    clients = set(ds.clients)
    for ch in m["expected"]["channels"]:
        subs = {s.record.ack_inbox: s for s in ds.channel(ch["name"]).subscriptions.values()}
        assert len(subs) == ch["subs_count"]
        for e in ch["subscriptions"]:
            pending = subs[e["ack_inbox"]].pending
            s = subs[e["ack_inbox"]].record
            assert s.client_id == e["client_id"]
            assert s.inbox == e["inbox"]
            assert s.durable_name == e.get("durable_name", "")
            assert s.qgroup == e.get("queue_name", "")
            assert (s.is_durable or bool(s.durable_name)) is e["is_durable"]
            assert _is_offline(s, clients) is e["is_offline"]
            assert s.max_inflight == e["max_inflight"]
            assert s.ack_wait_secs == e["ack_wait"]
            assert s.last_sent == e["last_sent"]
            assert len(pending) == e["pending_count"]


def _slices_on_disk(ds: Datastore, m: dict[str, Any]) -> None:
    crc = crc32_func()
    for channel, expected in m["slices_on_disk"]["channels"].items():
        info = ds.channel(channel)
        got = []
        for e in expected:
            rs = recover_slice(channel, info.path, e["slice"], crc=crc)
            got.append((rs.info.number, rs.info.count, rs.info.first_seq, rs.info.last_seq))
        want = [
            (e["slice"], e["records"], e["first_seq_in_file"], e["last_seq_in_file"])
            for e in expected
        ]
        assert got == want


def test_slices_on_disk(recovered: tuple[Datastore, dict[str, Any]]) -> None:
    _slices_on_disk(*recovered)


def test_slice_metadata_allows_pruning(recovered: tuple[Datastore, dict[str, Any]]) -> None:
    ds, m = recovered
    for ch in m["expected"]["channels"]:
        slices: tuple[SliceInfo, ...] = ds.slices(ch["name"])
        expected = m["expected"]["messages"][ch["name"]]
        by_seq = {e["sequence"]: int(e["timestamp_ns"]) for e in expected}
        for sl in slices:
            assert sl.index_usable and sl.contiguous
            assert sl.dat_path.endswith(f"msgs.{sl.number}.dat")
            live = [s for s in range(sl.first_live_seq, sl.last_seq + 1)]
            assert all(s in by_seq for s in live)
            if sl.removed == 0 and live:
                assert sl.first_timestamp == by_seq[sl.first_seq]
            if live:
                assert sl.last_timestamp == by_seq[sl.last_seq]
        if slices:
            assert slices[0].first_live_seq == ch["first_seq"]
            assert slices[-1].last_seq == ch["last_seq"]


def test_removed_leading_records_stay_on_disk() -> None:
    ds, _ = _open("plain")
    first = ds.slices("orders.created")[0]
    assert (first.number, first.first_seq, first.removed, first.first_live_seq) == (2, 5, 1, 6)
    # seq 5 is still in msgs.2.dat but is not part of the channel any more
    assert ds.get_message("orders.created", 5) is None
    assert [m.sequence for m in ds.iter_messages("orders.created", 1, 7)] == [6, 7]


def test_expired_channel_keeps_last_slice() -> None:
    ds, m = _open("expired")
    info = ds.channel("ephemeral.readings")
    assert [s.number for s in info.slices] == [3]
    assert info.slices[0].removed == 1 and info.slices[0].live_count == 0
    assert list(ds.iter_messages("ephemeral.readings")) == []
    # without the age limit (e.g. clock before expiry) the record is visible again
    raw = open_datastore(datastore_dir("expired"))
    assert [x.sequence for x in raw.iter_messages("ephemeral.readings")] == [5]
    max_age = m["expected"]["limits"]["channels"]["ephemeral.readings"]["max_age"]
    ts = info.slices[0].last_timestamp
    kept = open_datastore(
        datastore_dir("expired"), limits=limits_from_manifest(m), now_ns=ts + max_age - 1
    )
    assert kept.channel("ephemeral.readings").msg_count == 1


def test_limits_change_first_seq() -> None:
    raw = open_datastore(datastore_dir("plain"))  # no limits: everything on disk
    assert (raw.channel("orders.created").first_seq, raw.channel("orders.created").msg_count) == (
        5,
        11,
    )


def test_encrypted_payloads_on_disk_are_not_plaintext() -> None:
    m = manifest("chacha")
    ds = open_datastore(datastore_dir("chacha"), limits=limits_from_manifest(m))  # no key
    for channel, expected in m["expected"]["messages"].items():
        for raw, e in zip(ds.iter_messages(channel), expected, strict=True):
            plain = base64.b64decode(e["data_b64"])
            if plain:
                assert raw.data[0] == m["encryption"]["cipher_code"]
                assert len(raw.data) == len(plain) + 29
            else:
                assert raw.data == b""


@pytest.mark.parametrize("name", ["aes", "chacha"])
def test_wrong_key_is_a_clear_error(name: str) -> None:
    m = manifest(name)
    ds = open_datastore(datastore_dir(name), encryption_key=b"not-the-key", limits=None)
    channel = m["expected"]["channels"][0]["name"]
    with pytest.raises(MessageDecryptionError) as err:
        list(ds.iter_messages(channel))
    text = str(err.value)
    assert "message authentication failed" in text
    assert "wrong encryption key" in text
    assert err.value.path is not None and err.value.path.endswith(".dat")
    assert err.value.offset is not None and err.value.offset >= 4


def test_readers_never_write() -> None:
    for name in ("plain", "aes", "chacha", "expired", "truncated"):
        before = tree_digest(datastore_dir(name))
        m = manifest(name)
        try:
            ds = open_datastore(datastore_dir(name), encryption_key=encryption_key(m))
            for channel in ds.channels:
                list(ds.iter_messages(channel))
        except Exception:
            assert name == "truncated"
        assert tree_digest(datastore_dir(name)) == before
