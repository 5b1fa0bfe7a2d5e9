"""One local SparkSession for the pipeline tests (JVM start-up dominates): created once, and
again after a module that ran its own (the standalone cluster's, test_spark_cluster.py).
The STAN servers the live-source and sink tests read from and publish to, and a datastore
whose oldest slice the server discarded."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.helpers import DiscardedSlice, discard_first_slice, write_store
from tests.pipeline.live_helpers import LiveServer
from tests.pipeline.sink_helpers import SERVER_KINDS, server_fixture
from tests.pipeline.spark_cluster import stop_spark

# Two task threads; a failed task is retried once, as a cluster retries it (the sink's
# retry tests need that; local[2] would fail the job at the first task failure).
LOCAL_MASTER = "local[2,2]"


@pytest.fixture(scope="session")
def spark_environment() -> Iterator[None]:
    """PySpark and Java present, workers on this interpreter; the last session stopped at
    the end."""
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed (scripts/install-java.sh)")
    # Workers must run this interpreter, where stanpkg and pyarrow are installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    yield
    stop_spark()


@pytest.fixture(scope="module")
def spark(spark_environment: None) -> Any:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(LOCAL_MASTER)
        .appName("stanpkg-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A stanpkg server with its defaults (memory store), shared by a module's tests."""
    server = LiveServer(tmp_path_factory.mktemp("live"))
    yield server
    server.stop()


@pytest.fixture
def start_live_server(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """Starts servers of the test's own (LiveServer's arguments, in ``tmp_path``), all
    stopped after the test (a test may stop one itself: stopping twice does nothing)."""
    started: list[LiveServer] = []

    def start(*args: str) -> LiveServer:
        started.append(LiveServer(tmp_path, *args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module", params=SERVER_KINDS)
def sink_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """Each server the sink scenarios run against (sink_helpers.SERVER_KINDS), in turn."""
    yield from server_fixture(request.param, tmp_path_factory)


@pytest.fixture
def discarded_slice(tmp_path: Path) -> DiscardedSlice:
    """``tmp_path/ds``: channel ``c``, 8 messages in slices of 4, the first slice discarded
    by the server (its files renamed to .bak, for the archive script)."""
    root = write_store(tmp_path / "ds", {"c": 8}, slice_max_msgs=4)
    dat, idx = discard_first_slice(root, "c")
    return DiscardedSlice(root, dat, idx, tmp_path / "ds.archive" / "c")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pyspark warns that it does not fully support pandas 3; the data source uses Arrow.
    quiet = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
    for item in items:
        if "tests/pipeline/" in item.nodeid.replace("\\", "/"):
            item.add_marker(quiet)
