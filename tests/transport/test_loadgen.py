"""``stanpkg bench`` against a fake streaming server (a second process that acks PubMsgs)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stanpkg.client import StanBenchClient, StanError, StanSubscription, _first_varint
from stanpkg.loadgen.cli import main, msgs_per_client
from stanpkg.loadgen.fake_server import pubmsg_fields
from stanpkg.loadgen.report import Benchmark, Sample, comma_format, human_bytes
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto.encoders import encode_varint as varint
from tests.transport.conftest import NatsProcess, free_port


@pytest.fixture
def fake_stan(nats_server: NatsProcess) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "stanpkg.loadgen.fake_server", "-s", nats_server.url, "-c", "bench"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        yield nats_server.url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


RATE = r"[\d,]+ msgs/sec ~ [\d.]+ [KMG]?B/sec"


def test_publishers_only(fake_stan: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-s", fake_stan, "-c", "bench", "-np", "3", "-n", "3000", "-ms", "64", "foo"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Starting benchmark [msgs=3000, msgsize=64, pubs=3, subs=0]" in err
    lines = out.splitlines()
    assert re.fullmatch(f"Pub stats: {RATE}", lines[0])
    assert re.fullmatch(rf" \[1\] {RATE} \(1000 msgs\)", lines[1])
    assert re.fullmatch(r" min [\d,]+ \| avg [\d,]+ \| max [\d,]+ \| stddev [\d,]+ msgs", lines[4])


def test_publishers_and_subscribers(fake_stan: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["-s", fake_stan, "-c", "bench", "-np", "2", "-ns", "2", "-n", "2000", "foo"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert re.fullmatch(f"NATS Streaming Pub/Sub stats: {RATE}", lines[0])
    assert re.fullmatch(f" Pub stats: {RATE}", lines[1])
    assert any(re.fullmatch(f" Sub stats: {RATE}", line) for line in lines)
    assert len(re.findall(r"\(2000 msgs\)", out)) == 2  # each subscriber got everything


def test_queue_group_and_sync(
    fake_stan: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    csv_file = tmp_path / "bench.csv"
    args = ["-s", fake_stan, "-c", "bench", "-np", "1", "-ns", "2", "-n", "500"]
    code = main([*args, "-qgroup", "q", "-sync", "-csv", str(csv_file), "foo"])
    out, err = capsys.readouterr()
    assert code == 0, err
    counts = [int(n) for n in re.findall(r"\((\d+) msgs\)", out)]
    assert sum(counts) >= 500  # split across the group (plus the "done" hand-off)
    assert f"Saved metric data in csv file {csv_file}" in out
    rows = csv_file.read_text().splitlines()
    assert rows[0] == "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs"
    assert len(rows) == 4


def test_wrong_cluster_id(fake_stan: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-s", fake_stan, "-c", "other", "-np", "1", "-n", "10", "foo"]) == 1
    _, err = capsys.readouterr()
    assert (
        "Publisher benchmark-pub-0 can't connect: "
        "stan: connect request timeout (possibly wrong cluster ID?)"
    ) in err


def test_no_server_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-s", f"nats://127.0.0.1:{free_port()}", "-np", "1", "-n", "1", "foo"]) == 1
    _, err = capsys.readouterr()
    assert "can't connect: nats: no servers available for connection" in err
    assert main([]) == 1
    assert "Usage: stanpkg bench" in capsys.readouterr().err


# -- pieces ---------------------------------------------------------------------------------
class CapturingNats:
    def __init__(self) -> None:
        self.published: list[tuple[str, bytes, str]] = []

    def new_inbox(self) -> str:
        return "_INBOX.test"

    def publish(self, subject: str, payload: bytes, reply: str = "") -> None:
        self.published.append((subject, payload, reply))


def test_pubmsg_and_ack_encoding() -> None:
    nc = CapturingNats()
    client = StanBenchClient(nc, "c", "client-1")  # type: ignore[arg-type]
    client._response = pb.ConnectResponse(pubPrefix="_STAN.pub.c")
    payload = b"\x00" * 300
    guid = client.publish_async("chan.x", payload)
    subject, raw, reply = nc.published[-1]
    msg = pb.PubMsg.FromString(raw)
    assert subject == "_STAN.pub.c.chan.x" and reply.startswith("_STAN.acks.")
    assert (msg.clientID, msg.guid, msg.subject, msg.data) == ("client-1", guid, "chan.x", payload)
    assert msg.connID == client._conn_id
    assert pubmsg_fields(raw) == (guid.encode(), b"chan.x", payload)
    assert client.inflight == 1
    client._on_ack(reply, "", pb.PubAck(guid=guid).SerializeToString())
    assert client.inflight == 0 and client.acked == 1
    other = client.publish_async("chan.x", payload)
    client._on_ack(reply, "", pb.PubAck(guid=other, error="boom").SerializeToString())
    assert client.ack_errors == ["boom"]

    seen: list[int] = []
    sub = StanSubscription(client, "chan.x", seen.append)
    for seq in (1, 127, 128, 300, 2**40):
        proto = pb.MsgProto(sequence=seq, subject="chan.x", data=b"d", timestamp=5)
        assert _first_varint(proto.SerializeToString()) == seq
        sub.handle("_INBOX.test", "", proto.SerializeToString())
    sub.set_ack_inbox("_INBOX.acks")  # the early messages are acked now
    acks = [pb.Ack.FromString(p) for s, p, _ in nc.published if s == "_INBOX.acks"]
    assert [(a.subject, a.sequence) for a in acks] == [
        ("chan.x", s) for s in (1, 127, 128, 300, 2**40)
    ]
    assert seen == [1, 127, 128, 300, 2**40]
    assert varint(300) == b"\xac\x02"


def test_a_puback_after_the_wait_gave_up_is_no_error() -> None:
    """A failover: publish() times out, the PubAck comes later and finds nobody waiting."""
    nc = CapturingNats()
    client = StanBenchClient(nc, "c", "client-1")  # type: ignore[arg-type]
    client._response = pb.ConnectResponse(pubPrefix="_STAN.pub.c")

    async def publish_too_briefly() -> None:
        with pytest.raises(StanError, match="publish ack timeout"):
            await client.publish("chan.x", b"late", timeout=0.01)

    asyncio.run(publish_too_briefly())
    raw = nc.published[-1][1]
    client._on_ack("", "", pb.PubAck(guid=pb.PubMsg.FromString(raw).guid).SerializeToString())
    assert client.acked == 1 and client.inflight == 0


def test_report_format() -> None:
    assert comma_format(1234567) == "1,234,567"
    assert human_bytes(100) == "100.00 B"
    assert human_bytes(1.22 * 1024 * 1024) == "1.22 MB"
    assert msgs_per_client(10, 3) == [4, 3, 3]
    bench = Benchmark("NATS Streaming")
    bench.pubs.add(Sample(10000, 128, 0.0, 1.0))
    assert bench.report() == "Pub stats: 10,000 msgs/sec ~ 1.22 MB/sec\n"
    bench.pubs.add(Sample(10000, 128, 0.0, 2.0))
    bench.subs.add(Sample(20000, 128, 0.5, 2.5))
    assert bench.report() == (
        "NATS Streaming Pub/Sub stats: 16,000 msgs/sec ~ 1.95 MB/sec\n"
        " Pub stats: 10,000 msgs/sec ~ 1.22 MB/sec\n"
        "  [1] 10,000 msgs/sec ~ 1.22 MB/sec (10000 msgs)\n"
        "  [2] 5,000 msgs/sec ~ 625.00 KB/sec (10000 msgs)\n"
        "  min 5,000 | avg 7,500 | max 10,000 | stddev 2,500 msgs\n"
        " Sub stats: 10,000 msgs/sec ~ 1.22 MB/sec\n"
    )
