"""The live source's reader on a real stanpkg server: several ranges on one connection, and
a range that ends before the channel's head costs the server nothing past its end."""

from __future__ import annotations

import asyncio
import json
import urllib.request

from stanpkg.client import StanBenchClient
from stanpkg.pipeline.live_client import RangeRead, iter_ranges
from stanpkg.pipeline.live_options import LiveOptions
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.transport import NatsConnection
from tests.pipeline.live_helpers import LiveServer, payloads


def reading_clients(server: LiveServer) -> list[str]:
    with urllib.request.urlopen(f"{server.monitor}/streaming/clientsz", timeout=5) as answer:
        clients = json.loads(answer.read())["clients"] or []
    return [c["id"] for c in clients if "-read-" in c["id"]]


def test_several_ranges_are_read_in_turn_on_one_connection(live_server: LiveServer) -> None:
    for channel in ("r.a", "r.b"):
        live_server.publish(channel, payloads(channel, 1, 6))
    options = LiveOptions.parse(live_server.options(channels="r.*"))
    ranges = [("r.a", 0, 3, RangeRead()), ("r.b", 1, 4, RangeRead())]
    ranges += [("r.b", 4, 4, RangeRead()), ("r.a", 3, 6, RangeRead())]  # empty, then more
    got = []
    for channel, batch in iter_ranges(options, ranges, 2):
        got += [(channel, seq, data) for seq, data in zip(batch.sequence, batch.data, strict=True)]
        assert len(reading_clients(live_server)) == 1
    expected = [("r.a", s, d) for s, d in zip(range(1, 4), payloads("r.a", 1, 3), strict=True)]
    expected += [("r.b", s, d) for s, d in zip(range(2, 5), payloads("r.b", 2, 4), strict=True)]
    expected += [("r.a", s, d) for s, d in zip(range(4, 7), payloads("r.a", 4, 6), strict=True)]
    assert got == expected
    assert [r[3].messages for r in ranges] == [3, 3, 0, 3]
    assert ranges[0][3].payload_bytes == sum(map(len, payloads("r.a", 1, 3)))
    assert reading_clients(live_server) == []  # closed at the end


def test_a_subscription_gets_nothing_past_its_last_wanted_sequence(live_server: LiveServer) -> None:
    live_server.publish("head", payloads("head", 1, 100))

    async def received(last_wanted: int) -> int:
        nc = await NatsConnection.connect(live_server.url)
        stan = await StanBenchClient.connect(nc, live_server.cluster_id, f"lw-{last_wanted}")
        got: list[int] = []
        sub = await stan.subscribe(
            "head",
            got.append,
            start_position=pb.SequenceStart,
            start_sequence=11,
            max_inflight=7,
            last_wanted=last_wanted,
        )
        for _ in range(100):  # until the server has sent what it will send
            before = len(got)
            await asyncio.sleep(0.1)
            if got and len(got) == before:
                break
        await stan.close_subscription(sub)
        await stan.close()
        await nc.close()
        assert got == list(range(11, 11 + len(got)))
        return len(got)

    assert asyncio.run(received(40)) == 30  # 11..40
    assert asyncio.run(received(13)) == 3  # fewer than max_inflight: none acknowledged
    assert asyncio.run(received(0)) == 90  # no limit: up to the channel's head
