"""Bad input to the live source: options, a server that is down, a wrong cluster ID, a range
the server no longer holds. Each fails at once (or within the timeout named) with an error
naming the option or channel."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stanpkg.pipeline import register
from stanpkg.pipeline.live_client import (
    LiveSourceError,
    RangeRead,
    channel_bounds,
    check_connection,
    iter_range,
)
from stanpkg.pipeline.live_options import LiveOptions
from stanpkg.pipeline.options import OptionError
from tests.pipeline.live_helpers import LiveServer, free_port, parquet_query, payloads

BASE = {"servers": "nats://127.0.0.1:4222", "cluster_id": "c", "channels": "a"}


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"startingOffset": "earliest"}, "unknown option(s) for a live read: startingoffset"),
        ({"path": "/data"}, "servers and path: give servers"),
        ({"cluster_id": ""}, "cluster_id: the STAN cluster ID is required"),
        ({"channels": ""}, "channels: expected channel names"),
        ({"channels": "orders.*"}, "channels: wildcard patterns need the monitor option"),
        ({"channels": "a..b"}, "channels: invalid channel pattern"),
        ({"monitor": "localhost:8222"}, "monitor: expected an http(s):// URL"),
        ({"startingOffsets": "[1]"}, "startingoffsets: expected a JSON object"),
        ({"startingOffsets": '{"a": -1}'}, "startingoffsets: expected a JSON object"),
        ({"endingOffsets": "{"}, "endingoffsets: invalid JSON"),
        ({"maxMessagesPerTrigger": "0"}, "maxmessagespertrigger: expected a positive integer"),
        ({"failOnDataLoss": "maybe"}, "failondataloss: expected true or false"),
        ({"connectTimeout": "soon"}, "connecttimeout: expected seconds"),
        ({"clientIdPrefix": "a.b"}, "clientIdPrefix: letters, digits"),
    ],
)
def test_wrong_option_is_named(extra: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError) as err:
        LiveOptions.parse({**BASE, **extra})
    assert named in str(err.value)


def test_server_down_fails_within_the_connect_timeout() -> None:
    options = LiveOptions.parse(
        {**BASE, "servers": f"nats://127.0.0.1:{free_port()}", "connectTimeout": "1"}
    )
    with pytest.raises(LiveSourceError, match=r"servers: cannot connect to NATS at nats://"):
        check_connection(options.connection)


def test_wrong_cluster_id_is_named(live_server: LiveServer) -> None:
    options = LiveOptions.parse(
        {**live_server.options(channels="a", connectTimeout="1"), "cluster_id": "not-this-one"}
    )
    with pytest.raises(LiveSourceError, match="cluster_id: no STAN server of cluster"):
        check_connection(options.connection)
    # The monitoring endpoint says which cluster it serves.
    with pytest.raises(LiveSourceError, match=f"is cluster '{live_server.cluster_id}'"):
        channel_bounds(options)


def test_range_the_server_no_longer_holds(live_server: LiveServer) -> None:
    """A range past what the server delivers (removed while the query ran) stops after
    idleTimeout: an error naming channel and sequences, or skipped and counted."""
    live_server.publish("short", payloads("short", 1, 3))
    options = LiveOptions.parse(live_server.options(channels="short", idleTimeout="0.5"))
    started = time.monotonic()
    named = r"channel short: no message after sequence 3 .* messages 4\.\.5 are no longer"
    with pytest.raises(LiveSourceError, match=named):
        list(iter_range(options, "short", 2, 5, 100, RangeRead()))
    assert time.monotonic() - started < 30  # not a hang (generous: shared machine)

    read = RangeRead()
    skipping = dataclasses.replace(options, fail_on_data_loss=False)
    batches = iter_range(skipping, "short", 2, 5, 100, read)
    got = [seq for batch in batches for seq in batch.sequence]
    assert got == [3] and read.lost == [(4, 5)]


@pytest.mark.slow
def test_streaming_query_fails_with_the_named_problem(spark: Any, tmp_path: Path) -> None:
    register(spark)

    def start(options: dict[str, str]) -> None:
        frame = spark.readStream.format("stan").options(**options).load()
        checkpoint = tmp_path / f"cp{time.monotonic_ns()}"
        parquet_query(frame, tmp_path / "out", checkpoint, available_now=True)

    down = {**BASE, "servers": f"nats://127.0.0.1:{free_port()}", "connectTimeout": "1"}
    with pytest.raises(Exception, match="servers: cannot connect to NATS"):
        start(down)
    with pytest.raises(Exception, match=r"unknown option.*maxmessages"):
        start({**BASE, "maxMessages": "5"})
    with pytest.raises(Exception, match="servers: a streaming read follows a live server"):
        start({"path": str(tmp_path)})


def test_connection_lost_mid_range_fails_the_task_even_when_skipping(
    start_live_server: Callable[..., LiveServer],
) -> None:
    """A server gone while a range is read is not data loss: the task fails (and Spark
    retries it) whatever failOnDataLoss says."""
    live = start_live_server()
    live.publish("gone", payloads("gone", 1, 5))
    options = LiveOptions.parse(
        live.options(channels="gone", idleTimeout="0.5", failOnDataLoss="false")
    )
    batches = iter_range(options, "gone", 0, 8, 5, RangeRead())
    assert next(batches).sequence == (1, 2, 3, 4, 5)
    live.stop()
    with pytest.raises(LiveSourceError, match=r"channel gone: connection to .* lost"):
        next(batches)
