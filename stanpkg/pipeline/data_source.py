"""The ``stan`` PySpark data source: ``spark.read.format("stan").option("path", DIR).load()``
reads a FILE store on disk; with ``option("servers", URLS)`` it reads a live server
(``spark.readStream`` follows it, see live_source.py). ``df.write.format("stan")`` and
``df.writeStream.format("stan")`` publish to a live server (sink.py).

Spark 4's Python Data Source API: the source is instantiated where the query is planned
(options parsed, datastore recovered, one partition per slice), and ``read`` runs on the
executors, one slice per task, returning Arrow batches. Call :func:`register` once per
SparkSession before using the format.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from stanpkg.pipeline.batches import COLUMNS, SliceReadStats, read_task_batches
from stanpkg.pipeline.live_options import LiveOptions, is_live
from stanpkg.pipeline.metrics import ReadMetrics
from stanpkg.pipeline.options import OptionError, ReadOptions
from stanpkg.pipeline.planning import SliceTask, plan_read
from stanpkg.stores.file.format import SliceReader

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SCHEMA", "ReadMetrics", "StanDataSource", "StanReader", "register"]

log = logging.getLogger("stanpkg.pipeline")

FORMAT = "stan"
_SPARK_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "int64": LongType(),
    "binary": BinaryType(),
    "timestamp[us, tz=UTC]": TimestampType(),
    "bool": BooleanType(),
    "int32": IntegerType(),
}
SCHEMA = StructType(
    [StructField(name, _SPARK_TYPES[str(kind)], nullable=False) for name, kind in COLUMNS]
)
_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_REDACTION_CONF = "spark.sql.redaction.options.regex"


class SlicePartition(InputPartition):
    """One slice task plus the (configuration-only) reader that decodes it."""

    def __init__(self, task: SliceTask, reader: SliceReader) -> None:
        super().__init__(task)
        self.task = task
        self.reader = reader


class StanReader(DataSourceReader):
    """Reads the slices a query needs; every slice is one partition."""

    def __init__(self, options: ReadOptions, metrics: ReadMetrics | None) -> None:
        self.options = options
        self.metrics = metrics

    def partitions(self) -> Sequence[InputPartition]:
        plan = plan_read(self.options)
        for line in plan.log:
            log.warning("stan: %s: %s", self.options.path, line)
        return [SlicePartition(task, plan.reader) for task in plan.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SlicePartition):
            return  # Spark's placeholder partition when there is nothing to read
        stats = SliceReadStats()
        try:
            yield from read_task_batches(
                partition.task,
                partition.reader,
                permissive=self.options.permissive,
                batch_rows=self.options.batch_rows,
                stats=stats,
            )
        finally:
            if self.metrics is not None:
                self.metrics.add(stats)


class StanPushdownReader(StanReader):
    """A reader that also narrows itself with the query's filters (Spark >= 4.1)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from stanpkg.pipeline.filters import narrow_options

        self.options, remaining = narrow_options(self.options, filters)
        yield from remaining


class StanDataSource(DataSource):
    """``format("stan")``; see docs/pipeline.md for the options."""

    metrics: ReadMetrics | None = None
    reader_class: type[StanReader] = StanReader

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        if is_live(self.options):
            from stanpkg.pipeline.live_source import LiveBatchReader

            return LiveBatchReader(LiveOptions.parse(self.options), self.metrics)
        return self.reader_class(ReadOptions.parse(self.options), self.metrics)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        if not is_live(self.options):
            raise OptionError(
                "servers: a streaming read follows a live server (option servers); "
                "a FILE store on disk (option path) is read with spark.read"
            )
        from stanpkg.pipeline.live_source import LiveStreamReader

        return LiveStreamReader(LiveOptions.parse(self.options), self.metrics)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from stanpkg.pipeline.sink import StanBatchWriter, plan_sink

        if overwrite:
            raise OptionError(
                "mode: a STAN channel cannot be overwritten (messages are only appended); "
                'use .mode("append")'
            )
        return StanBatchWriter(plan_sink(dict(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from stanpkg.pipeline.sink import StanStreamWriter, plan_sink

        # overwrite: the complete output mode; each trigger publishes the whole result.
        return StanStreamWriter(plan_sink(dict(self.options), schema))


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise ValueError(
            f"the {FORMAT} source has a fixed schema ({SCHEMA.simpleString()}); "
            "select columns after load() instead of passing .schema()"
        )


@dataclass(frozen=True)
class Registration:
    """What :func:`register` set up: the metrics and whether filters are pushed down."""

    metrics: ReadMetrics | None
    pushdown: bool


def register(spark: SparkSession, *, pushdown: bool | None = None) -> Registration:
    """Register ``format("stan")`` on ``spark``: the source and the sink.

    ``pushdown``: None enables filter pushdown only where the Spark version is known to
    keep pushed-down state per query (Spark 4.1-4.3 reuse it across queries of one
    DataFrame, which would drop rows); True forces it (safe when every query uses its own
    ``load()``); False disables it. Options always prune.
    """
    metrics = _create_metrics(spark)
    use_pushdown = _pushdown_is_safe(spark) if pushdown is None else pushdown
    if use_pushdown:
        spark.conf.set(_PUSHDOWN_CONF, "true")
    _redact_encryption_key(spark)
    # A class built here (pickled by value, with its metrics) rather than one in this
    # module: each registration carries its own accumulators to the executors.
    source = type(
        "StanDataSource",
        (StanDataSource,),
        {
            "metrics": metrics,
            "reader_class": StanPushdownReader if use_pushdown else StanReader,
            "__qualname__": "register.<locals>.StanDataSource",
        },
    )
    spark.dataSource.register(source)
    return Registration(metrics, use_pushdown)


def _create_metrics(spark: SparkSession) -> ReadMetrics | None:
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect sessions have no accumulators
        return None
    return ReadMetrics(context.accumulator(0), context.accumulator(0), context.accumulator(0))


def _pushdown_is_safe(spark: SparkSession) -> bool:
    """True when pushFilters exists and Spark scopes pushed-down read state to one scan."""
    if "pushFilters" not in DataSourceReader.__dict__:
        return False
    try:
        jvm: Any = spark._jvm  # classic PySpark only
        builder = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.datasources.v2.python.PythonScanBuilder"
        )
        fields = {f.getName() for f in builder.getDeclaredFields()}
    except Exception:
        return False
    return "readInfo" in fields


def _redact_encryption_key(spark: SparkSession) -> None:
    """Keep an ``encryptionKey`` option out of plan strings (UI, logs, explain)."""
    current = spark.conf.get(_REDACTION_CONF, None) or "(?i)url"
    if "encryptionkey" not in current.lower():
        spark.conf.set(_REDACTION_CONF, f"{current}|(?i)encryptionkey")
