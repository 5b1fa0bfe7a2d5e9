"""One local SparkSession for the pipeline tests (JVM start-up dominates): created once, and
again after a module that ran its own (the standalone cluster's, test_spark_cluster.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pyspark warns that it does not fully support pandas 3; the data source uses Arrow.
    quiet = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
    for item in items:
        if "tests/pipeline/" in item.nodeid.replace("\\", "/"):
            item.add_marker(quiet)
