"""Every Spark feature of stanpkg on a real Spark standalone cluster (a master and two
workers, each executor its own JVM and Python workers), not only in local mode: export
of a FILE store, a live-source query, and the sink against stanpkg (memory and FILE
stores) and the Go reference server, with task retries (spark.task.maxFailures 4)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stanpkg.pipeline import register
from stanpkg.pipeline.export import ExportRequest, prepare_export, run_export
from stanpkg.pipeline.state import open_state_store
from tests.pipeline import sink_scenarios as scenarios
from tests.pipeline.helpers import write_store
from tests.pipeline.live_helpers import LiveServer, parquet_query, parquet_rows, payloads
from tests.pipeline.spark_cluster import StandaloneCluster, stop_spark

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(
    spark_environment: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneCluster]:
    started = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def spark(cluster: StandaloneCluster) -> Iterator[Any]:
    """This module's session, on the cluster (the local one is stopped meanwhile)."""
    session = cluster.session("stanpkg-cluster-tests")
    yield session
    stop_spark()


def test_two_executors_on_two_workers(spark: Any, cluster: StandaloneCluster) -> None:
    assert spark.sparkContext.master == cluster.url
    assert cluster.executors(spark) == 2
    # Tasks run in the executors' Python workers, not in this process.
    import os

    pids = set(spark.sparkContext.parallelize(range(8), 4).map(lambda _: os.getpid()).collect())
    assert os.getpid() not in pids


def test_export(spark: Any, tmp_path: Path) -> None:
    """The datastore is read by the executors, at the same path (same machine here)."""
    root = write_store(tmp_path / "ds", {"orders": 40, "audit": 9}, slice_max_msgs=5)
    out = tmp_path / "export"
    request = ExportRequest(out=str(out), datastore=str(root))
    store = open_state_store(request.out)
    job = prepare_export(request, store)
    assert run_export(spark, job, store, progress=lambda line: None).messages == 49
    got = spark.read.parquet(str(out)).select("channel", "sequence").collect()
    assert sorted((r.channel, r.sequence) for r in got) == sorted(
        [("orders", s) for s in range(1, 41)] + [("audit", s) for s in range(1, 10)]
    )


def test_live_source_query(
    spark: Any, start_live_server: Callable[..., LiveServer], tmp_path: Path
) -> None:
    live = start_live_server("-mc", "0")
    live.publish("cl.one", payloads("cl.one", 1, 250))
    live.publish("cl.two", payloads("cl.two", 1, 30))
    register(spark)
    frame = (
        spark.readStream.format("stan")
        .options(**live.options(channels="cl.*", maxMessagesPerPartition=100))
        .load()
    )
    parquet_query(frame, tmp_path / "out", tmp_path / "cp", available_now=True)
    assert sorted(parquet_rows(spark, tmp_path / "out")) == sorted(
        [("cl.one", n, d) for n, d in enumerate(payloads("cl.one", 1, 250), 1)]
        + [("cl.two", n, d) for n, d in enumerate(payloads("cl.two", 1, 30), 1)]
    )


def test_sink_batch_write_to_two_channels_by_column(spark: Any, sink_server: LiveServer) -> None:
    scenarios.batch_write_by_column(spark, sink_server)


def test_sink_batch_write_task_retried(spark: Any, sink_server: LiveServer) -> None:
    scenarios.batch_write_retried(spark, sink_server)


def test_sink_stream_available_now_and_restarted(
    spark: Any, sink_server: LiveServer, tmp_path: Path
) -> None:
    scenarios.stream_from_files(spark, sink_server, tmp_path)


def test_sink_stream_task_retried(spark: Any, sink_server: LiveServer, tmp_path: Path) -> None:
    scenarios.stream_retried(spark, sink_server, tmp_path)


def test_sink_wrong_server_or_cluster_id_fails_at_planning(
    spark: Any, start_live_server: Callable[..., LiveServer]
) -> None:
    register(spark)
    frame = spark.createDataFrame([("c", b"x")], "channel string, data binary")
    live = start_live_server()
    for options, named in [
        ({"servers": "nats://127.0.0.1:1"}, "servers: cannot connect to NATS at nats://"),
        ({"cluster_id": "not-this-one"}, "cluster_id: no STAN server of cluster"),
    ]:
        base = {"servers": live.url, "cluster_id": live.cluster_id, "connectTimeout": "1"}
        writer = frame.write.format("stan").options(**(base | options))
        with pytest.raises(Exception, match=named):
            writer.mode("append").save()
