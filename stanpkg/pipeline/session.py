"""The SparkSession of stanpkg's own jobs (``stanpkg export``)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "spark_session"]

DEFAULT_MASTER = "local[*]"


def spark_session(master: str = DEFAULT_MASTER, *, app_name: str, progress: bool) -> SparkSession:
    """A session on ``master`` (an existing one is reused, e.g. under spark-submit).

    Python workers must run this interpreter (stanpkg installed) unless told otherwise.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
