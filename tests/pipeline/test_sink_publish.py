"""The sink's options, columns and publishing (no Spark: what a task runs) against a real
stanpkg server: order, PubAcks, and every failure naming its cause within its timeout."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from stanpkg.pipeline.options import OptionError
from stanpkg.pipeline.sink_options import SinkOptions
from stanpkg.pipeline.sink_publish import SinkError, publish_batches
from tests.pipeline.live_helpers import LiveServer, free_port
from tests.pipeline.sink_helpers import received, rows, sink_options

BASE = {"servers": "nats://127.0.0.1:4222", "cluster_id": "c", "channel": "out"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(tmp_path_factory.mktemp("sink-publish"), "-mm", "0")
    yield live
    live.stop()


def batch(data: list[Any], channels: list[str | None] | None = None) -> pa.RecordBatch:
    columns = {"data": pa.array(data)}
    if channels is not None:
        columns["channel"] = pa.array(channels, pa.string())
    return pa.RecordBatch.from_pydict(columns)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"channels": "a,b"}, "unknown option(s) for the stan sink: channels (the sink writes"),
        ({"startingOffsets": "earliest"}, "startingoffsets (options of the live source"),
        ({"chanel": "x"}, "unknown option(s) for the stan sink: chanel; accepted: acktimeout"),
        ({"channel": "a..b"}, "channel: invalid channel name 'a..b'"),
        ({"channel": "orders.*"}, "wildcards"),
        ({"servers": ""}, "servers: expected NATS URLs"),
        ({"cluster_id": ""}, "cluster_id: the STAN cluster ID is required"),
        ({"maxInflight": "0"}, "maxinflight: expected a positive integer"),
        ({"ackTimeout": "soon"}, "acktimeout: expected seconds"),
        ({"clientIdPrefix": "a b"}, "clientIdPrefix: letters, digits"),
    ],
)
def test_wrong_option_is_named(extra: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError) as err:
        SinkOptions.parse({**BASE, **extra})
    assert named in str(err.value)


def test_options_and_what_spark_adds() -> None:
    options = SinkOptions.parse(
        {**BASE, "maxInflight": "8", "ackTimeout": "2.5", "checkpointLocation": "/cp",
         "password": "s3cret"}
    )  # fmt: skip
    assert (options.channel, options.max_inflight, options.ack_timeout) == ("out", 8, 2.5)
    assert "s3cret" not in repr(options)


@pytest.mark.parametrize(
    ("fields", "channel", "named"),
    [
        ({"payload": "binary"}, "out", "does not take column(s) payload: it takes data (binary"),
        ({"channel": "string"}, "out", "missing column data: the stan sink takes data"),
        ({"data": "int"}, "out", "column data: expected binary or string, got int"),
        ({"data": "binary", "channel": "int"}, "out", "column channel: expected string, got int"),
        ({"data": "string"}, "", "channel: give option channel or a channel column"),
    ],
)
def test_wrong_columns_are_named(fields: dict[str, str], channel: str, named: str) -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    from stanpkg.pipeline.sink import check_columns

    types = {"binary": BinaryType(), "string": StringType(), "int": IntegerType()}
    schema = StructType([StructField(k, types[v]) for k, v in fields.items()])
    with pytest.raises(OptionError) as err:
        check_columns(schema, SinkOptions.parse({**BASE, "channel": channel}))
    assert named in str(err.value)


def test_rows_land_in_order_on_their_channels(server: LiveServer) -> None:
    """The channel column wins; a null channel takes option channel; string or binary data;
    a window of 3 PubAcks (many refills) keeps the order."""
    options = SinkOptions.parse(sink_options(server, channel="p.default", maxInflight=3))
    first = batch(rows("a", 1, 50), ["p.a"] * 50)
    second = batch([b"b:1", b"d:1", b"b:2", b"d:2"], ["p.b", None, "p.b", None])
    third = batch([f"s:{n}" for n in range(1, 4)])  # strings, no channel column: the option
    result = publish_batches(options, iter([first, second, third]))
    assert result.messages == 57 and result.channels == {"p.a", "p.b", "p.default"}
    assert received(server, "p.a") == rows("a", 1, 50)
    assert received(server, "p.b") == [b"b:1", b"b:2"]
    assert received(server, "p.default") == [b"d:1", b"d:2", *rows("s", 1, 3)]


def test_bad_rows_fail_naming_the_column(server: LiveServer) -> None:
    options = SinkOptions.parse(sink_options(server))
    with pytest.raises(SinkError, match="column data: a row has a null payload"):
        publish_batches(options, iter([batch([b"x", None], ["ok", "ok"])]))
    with pytest.raises(SinkError, match="column channel: a row has a null channel"):
        publish_batches(options, iter([batch([b"x", b"y"], ["ok", None])]))
    with pytest.raises(SinkError, match="column channel: invalid channel name 'a b'"):
        publish_batches(options, iter([batch([b"x"], ["a b"])]))


def test_wrong_server_or_cluster_fails_within_the_connect_timeout(server: LiveServer) -> None:
    down = SinkOptions.parse(
        {**BASE, "servers": f"nats://127.0.0.1:{free_port()}", "connectTimeout": "1"}
    )
    with pytest.raises(SinkError, match=r"servers: cannot connect to NATS at nats://127"):
        publish_batches(down, iter([batch([b"x"])]))
    wrong = SinkOptions.parse(sink_options(server, cluster_id="not-this-one", connectTimeout=1))
    started = time.monotonic()
    with pytest.raises(SinkError, match="cluster_id: no STAN server of cluster 'not-this-one'"):
        publish_batches(wrong, iter([batch([b"x"], ["c"])]))
    assert time.monotonic() - started < 10  # 1 s, generous on a shared machine


def test_refused_message_fails_the_task(start_live_server: Callable[..., LiveServer]) -> None:
    """A PubAck with an error (here: a second channel over max_channels 1)."""
    options = SinkOptions.parse(sink_options(start_live_server("-mc", "1")))
    with pytest.raises(SinkError, match=r"the STAN server refused a message \(.*channels"):
        publish_batches(options, iter([batch([b"1", b"2"], ["one", "two"])]))


def test_no_pub_ack_within_ack_timeout_fails_the_task(
    start_live_server: Callable[..., LiveServer],
) -> None:
    """The STAN server stopped (SIGSTOP), its NATS server up: the PubAcks never come."""
    live = start_live_server()
    stopped: list[float] = []

    def batches() -> Iterator[pa.RecordBatch]:
        yield batch([b"before"])  # connected: the server answered
        os.kill(live.proc.pid, signal.SIGSTOP)
        stopped.append(time.monotonic())
        yield batch([b"x", b"y"])

    options = SinkOptions.parse(
        sink_options(live, channel="held", ackTimeout="1", connectTimeout="1")
    )
    try:
        with pytest.raises(SinkError, match=r"no PubAck .* for 1 s \(option ackTimeout\)"):
            publish_batches(options, batches())
    finally:
        os.kill(live.proc.pid, signal.SIGCONT)
    assert time.monotonic() - stopped[0] < 10


def test_connection_lost_mid_task_fails_it(start_live_server: Callable[..., LiveServer]) -> None:
    live = start_live_server()

    def batches() -> Iterator[pa.RecordBatch]:
        yield batch(rows("lost", 1, 100))
        live.stop()
        yield batch(rows("lost", 101, 200))

    options = SinkOptions.parse(sink_options(live, channel="lost", ackTimeout="5"))
    started = time.monotonic()
    with pytest.raises(SinkError, match=r"servers: connection to nats://.* lost"):
        publish_batches(options, batches())
    assert time.monotonic() - started < 20


def test_failure_injected_after_acknowledged_rows(server: LiveServer) -> None:
    options = SinkOptions.parse(
        sink_options(server, channel="inject", testOnlyFailFirstAttemptAfter=5)
    )
    with pytest.raises(SinkError, match="on purpose after 5 acknowledged row"):
        publish_batches(
            options, iter([batch(rows("i", 1, 3)), batch(rows("i", 4, 9))]), fail_after=5
        )
    assert received(server, "inject") == rows("i", 1, 5)
