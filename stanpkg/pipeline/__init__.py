"""stanpkg's data pipeline: query and export what a FILE store holds, with Spark, and
follow a live server's channels with Spark Structured Streaming.

* ``register(spark)`` adds the ``stan`` data source (``stanpkg.pipeline.data_source``): files
  on disk with ``path``/``config``, a live server with ``servers``
  (``stanpkg.pipeline.live_source``, also ``spark.readStream``); ``df.write`` and
  ``df.writeStream`` with ``servers`` publish rows to a live server
  (``stanpkg.pipeline.sink``);
* ``stanpkg export`` / ``stanpkg.pipeline.export`` writes messages out incrementally;
* ``stanpkg archive-slice`` / ``python -m stanpkg.pipeline.archive`` is a ready
  ``slice_archive_script``.

PySpark is imported only by the Spark parts, so the archive script runs without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from stanpkg.pipeline.data_source import Registration

__all__ = ["register"]


def register(spark: SparkSession, *, pushdown: bool | None = None) -> Registration:
    """Register the ``stan`` format, to read and to write (see
    ``stanpkg.pipeline.data_source.register``)."""
    from stanpkg.pipeline.data_source import register as register_source

    return register_source(spark, pushdown=pushdown)
