"""``stanpkg run -st file`` end to end: the reference's datastores served to the real
node-nats-streaming client, durable resume, startup failures, the directory lock."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.stores.file.helpers import (
    free_port,
    node_read,
    require_node,
    running_server,
    start_server,
)
from tests.stores.filestore_helpers import copy_datastore, manifest

pytestmark = pytest.mark.integration


def server_args(name: str, tmp_path: Path, *extra: str) -> tuple[list[str], Path, dict[str, Any]]:
    m = manifest(name)
    root = copy_datastore(name, tmp_path)
    conf = tmp_path / "stan.conf"
    conf.write_text(m["production"]["server_config"].replace("{DATASTORE}", str(root)))
    return ["-sc", str(conf), *extra], root, m


def deliver_all_job(url: str, m: dict[str, Any], client: str = "fixture-reader") -> dict[str, Any]:
    expected = m["expected"]["messages"]
    return {
        "url": url,
        "cluster": m["cluster_id"],
        "client": client,
        "subs": [{"key": ch, "channel": ch, "all": True} for ch in expected],
        "expect": {ch: len(msgs) for ch, msgs in expected.items()},
        "idleMs": 400,
        "timeoutMs": 15000,
    }


def monitored_state(port: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``/streaming/serverz`` and ``/streaming/channelsz?subs=1`` as JSON."""
    base = f"http://127.0.0.1:{port}/streaming"
    with urllib.request.urlopen(f"{base}/serverz", timeout=5) as resp:
        serverz = json.load(resp)
    with urllib.request.urlopen(f"{base}/channelsz?subs=1", timeout=5) as resp:
        channelsz = json.load(resp)
    return serverz, channelsz


def assert_same_state(port: int, m: dict[str, Any]) -> None:
    """What the server reports after recovery equals what the reference reported."""
    serverz, channelsz = monitored_state(port)
    expected = m["expected"]
    for key in ("cluster_id", "clients", "subscriptions", "channels", "total_msgs", "total_bytes"):
        assert serverz[key] == expected["server"][key], key
    by_name = {c["name"]: c for c in expected["channels"]}
    assert sorted(c["name"] for c in channelsz["channels"]) == sorted(by_name)
    for got in channelsz["channels"]:
        want = by_name[got["name"]]
        for key in ("msgs", "bytes", "first_seq", "last_seq", "subs_count"):
            assert got[key] == want[key], (got["name"], key)
        as_set = [
            sorted(json.dumps(s, sort_keys=True) for s in c.get("subscriptions", []))
            for c in (got, want)
        ]
        assert as_set[0] == as_set[1], got["name"]


def assert_delivered(got: dict[str, list[list[Any]]], m: dict[str, Any]) -> None:
    for channel, msgs in m["expected"]["messages"].items():
        seen = got[channel]
        assert [row[0] for row in seen] == [x["sequence"] for x in msgs], channel
        for row, want in zip(seen, msgs, strict=True):
            seq, subject, reply, data, stamp, redelivered = row
            assert (subject, reply, data) == (want["subject"], want["reply"], want["data_b64"])
            assert redelivered is False
            # the JS client holds int64 timestamps as doubles
            assert float(stamp) == float(int(want["timestamp_ns"])), (channel, seq)
            assert len(base64.b64decode(data)) == want["data_len"]


@pytest.mark.parametrize("name", ["plain", "aes", "chacha", "expired"])
def test_reference_datastore_served_to_node_client(name: str, tmp_path: Path) -> None:
    require_node()
    args, _, m = server_args(name, tmp_path)
    monitor = free_port()
    with running_server([*args, "-m", str(monitor)], tmp_path / "server.log") as server:
        assert_same_state(monitor, m)  # before any new client, as the fixture was read
        got = node_read(deliver_all_job(server.url, m))
        log = server.log()
    assert_delivered(got, m)
    assert "Recovered " in log and "[ERR]" not in log and "Traceback" not in log


@pytest.mark.slow
def test_truncated_datastore_both_modes(tmp_path: Path) -> None:
    args, root, m = server_args("truncated", tmp_path)
    failed = start_server(args, tmp_path / "first.log")
    assert failed.proc.returncode == 1
    log = failed.log()
    cut = m["cut"]
    assert (
        "[FTL] STREAM: Failed to start: unable to initialize the store: unable to recover "
        'message store for [ticks.cpu](file: "ticks.cpu/msgs.2.idx"): unexpected EOF '
        f'(file "{root / cut["file"]}", offset {cut["cut_record"]["record_offset"]})'
    ) in log or (
        f'(file "{root / cut["file"]}", offset {cut["cut_record"]["record_offset"]})' in log
        and "[FTL] STREAM: Failed to start: " in log
    )
    assert "Traceback" not in log
    assert "Restart with the ContinueOnUnexpectedEOF flag" in log

    require_node()
    monitor = free_port()
    second = [*args, "--file_truncate_bad_eof", "-m", str(monitor)]
    with running_server(second, tmp_path / "second.log") as server:
        assert_same_state(monitor, m)
        got = node_read(deliver_all_job(server.url, m))
        log = server.log()
    assert_delivered(got, m)
    assert f'File "{root / cut["file"]}" has been truncated to offset: ' in log
    again = start_server([*args, "--file_truncate_bad_eof"], tmp_path / "third.log")
    assert again.proc.returncode == 1
    assert (
        "[FTL] STREAM: Failed to start: file store should not be opened consecutively with "
        "the TruncateUnexpectedEOF option set to true"
    ) in again.log()
    with running_server(args, tmp_path / "fourth.log"):
        assert not (root / ".truncate.lck").exists()


@pytest.mark.slow
def test_durable_resumes_with_its_pending_messages(tmp_path: Path) -> None:
    require_node()
    args, _, m = server_args("plain", tmp_path)
    job = {
        "cluster": m["cluster_id"],
        "client": "auditor-1",
        "subs": [
            {
                "key": "aud",
                "channel": "orders.created",
                "durable": "audit-durable",
                "maxInFlight": 50,
                "ackWaitMs": 60000,
            }
        ],
        "expect": {"aud": 4},
        "idleMs": 800,
        "timeoutMs": 15000,
    }
    with running_server(args, tmp_path / "server.log") as server:
        got = node_read({**job, "url": server.url})
    # pending were [3, 6, 9, 12, 15]; 3 fell below first_seq 6 (max_msgs)
    assert sorted(row[0] for row in got["aud"]) == [6, 9, 12, 15]
    assert all(row[5] is True for row in got["aud"])  # redelivered
    # they were acked: after a restart the durable resumes with nothing pending
    with running_server(args, tmp_path / "server2.log") as server:
        got = node_read({**job, "url": server.url, "expect": {}, "idleMs": 1500})
    assert got["aud"] == []


@pytest.mark.slow
def test_durable_queue_group_resumes_after_shadow(tmp_path: Path) -> None:
    require_node()
    args, _, m = server_args("plain", tmp_path)
    with running_server(args, tmp_path / "server.log") as server:
        sub = {
            "key": "q",
            "channel": "orders.created",
            "durable": "archive-dq",
            "queue": "archivers",
            "all": True,
        }
        job = {
            "url": server.url,
            "cluster": m["cluster_id"],
            "client": "archiver-2",
            "subs": [sub],
            "expect": {},
            "idleMs": 1200,
            "timeoutMs": 8000,
        }
        assert node_read(job)["q"] == []  # shadow's last_sent 15: nothing new
        pub = {"key": "p", "channel": "orders.created", "startSeq": 15}
        got = node_read({**job, "client": "peek", "subs": [pub], "expect": {"p": 1}})
        assert [row[0] for row in got["p"]] == [15]


def test_wrong_key_fails_at_start(tmp_path: Path) -> None:
    args, _, _ = server_args("aes", tmp_path, "--encryption_key", "definitely-wrong")
    server = start_server(args, tmp_path / "server.log")
    assert server.proc.returncode == 1
    log = server.log()
    assert "[FTL] STREAM: Failed to start: " in log
    assert "(cipher: message authentication failed); wrong encryption key?" in log
    assert "Traceback" not in log


def test_second_server_on_the_same_directory(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    args = ["-st", "file", "--dir", str(directory), "-cid", "lock-test"]
    with running_server(args, tmp_path / "first.log"):
        second = start_server(args, tmp_path / "second.log")
        assert second.proc.returncode == 1
        assert (
            f'[FTL] STREAM: Failed to start: the store directory "{directory}" is in use by '
            f'another server (lock file "{directory}/.rootdir.lck" is held)'
        ) in second.log()


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("zero", 'unable to verify file version: EOF (file "{path}", offset 0)'),
        ("version", 'unsupported file version: 7 (supports [1..1]) (file "{path}", offset 0)'),
    ],
)
def test_damaged_files_at_server_start(tmp_path: Path, damage: str, expected: str) -> None:
    args, root, _ = server_args("plain", tmp_path)
    path = root / "orders.created" / "subs.dat"
    data = path.read_bytes()
    path.write_bytes(b"" if damage == "zero" else b"\x07\x00\x00\x00" + data[4:])
    server = start_server(args, tmp_path / "server.log")
    assert server.proc.returncode == 1
    log = server.log()
    assert "[FTL] STREAM: Failed to start: " in log
    assert "unable to recover subscription store for [orders.created]" in log
    assert expected.format(path=path) in log
    assert "Traceback" not in log


def test_written_by_stanpkg_read_back(tmp_path: Path) -> None:
    """Publish through the server, then read the directory with the format layer."""
    require_node()
    import asyncio

    from stanpkg.stores.file.format import open_datastore
    from tests.server.stan_client import StanClient

    directory = tmp_path / "store"
    args = ["-st", "file", "--dir", str(directory), "-cid", "rw", "--file_slice_max_msgs", "5"]
    payloads = [f"payload {i}".encode() for i in range(12)]

    async def publish(url: str) -> None:
        client = await StanClient.connect(url, "rw", "writer")
        for p in payloads:
            await client.publish("rw.chan", p)
        await client.close()

    with running_server(args, tmp_path / "server.log") as server:
        asyncio.run(publish(server.url))
        job = {
            "url": server.url,
            "cluster": "rw",
            "client": "r",
            "subs": [{"key": "c", "channel": "rw.chan", "all": True}],
            "expect": {"c": 12},
            "timeoutMs": 10000,
        }
        got = node_read(job)
    assert [base64.b64decode(row[3]) for row in got["c"]] == payloads
    ds = open_datastore(directory)
    assert [m.data for m in ds.iter_messages("rw.chan")] == payloads
    assert [sl.count for sl in ds.slices("rw.chan")] == [5, 5, 2]
    assert json.dumps(ds.cluster_id) == '"rw"'
