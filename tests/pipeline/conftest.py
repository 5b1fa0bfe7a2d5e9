"""One local SparkSession for the whole test session (JVM start-up dominates)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed (scripts/install-java.sh)")
    # Workers must run this interpreter, where stanpkg and pyarrow are installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("stanpkg-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pyspark warns that it does not fully support pandas 3; the data source uses Arrow.
    quiet = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
    for item in items:
        if "tests/pipeline/" in item.nodeid.replace("\\", "/"):
            item.add_marker(quiet)
