"""The ``stan`` source on a live server: ``spark.readStream.format("stan")
.option("servers", ...)`` (and a batch read between two offsets with ``spark.read``).

Spark plans each micro-batch on the driver (latestOffset, partitions: channel bounds from
the server) and runs ``read`` on the executors: a task reads a few channels' sequence
ranges, each a subscription started at the range's first sequence and closed at its last.
Offsets are checkpointed by Spark, so a restarted query resumes after the last committed
sequence.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from stanpkg.pipeline.batches import ARROW_SCHEMA
from stanpkg.pipeline.live_client import (
    MessageColumns,
    RangeRead,
    channel_bounds,
    check_connection,
    iter_ranges,
)
from stanpkg.pipeline.live_offsets import (
    SequenceRange,
    advance,
    ending_offsets,
    pack_ranges,
    split_ranges,
    starting_offsets,
)
from stanpkg.pipeline.live_options import LiveOptions, Offsets

if TYPE_CHECKING:
    from stanpkg.pipeline.metrics import ReadMetrics

__all__ = ["LiveBatchReader", "LiveStreamReader"]

log = logging.getLogger("stanpkg.pipeline")

_BATCH_ROWS = 8192


class RangePartition(InputPartition):
    """(start, end] ranges of one or more channels, read one after another."""

    def __init__(self, ranges: tuple[SequenceRange, ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


def range_partitions(
    start: dict[str, int], end: dict[str, int], max_per_partition: int
) -> list[InputPartition]:
    ranges = split_ranges(start, end, max_per_partition)
    return [RangePartition(group) for group in pack_ranges(ranges, max_per_partition)]


def read_ranges(
    options: LiveOptions, partition: InputPartition, metrics: ReadMetrics | None
) -> Iterator[pa.RecordBatch]:
    """The partition's messages as Arrow batches of the batch source's schema."""
    if not isinstance(partition, RangePartition):
        return  # Spark's placeholder partition when there is nothing to read
    reads = [(r.channel, r.start, r.end, RangeRead()) for r in partition.ranges]
    try:
        for channel, msgs in iter_ranges(options, reads, _BATCH_ROWS):
            yield to_record_batch(channel, msgs)
    finally:
        for channel, _start, _end, read in reads:
            if read.lost and not options.fail_on_data_loss:
                log.warning(
                    "stan: channel %s: skipped %d message(s) removed before they were read (%s)",
                    channel,
                    read.lost_count,
                    ", ".join(f"{lo}..{hi}" for lo, hi in read.lost),
                )
            if metrics is not None:
                metrics.messages.add(read.messages)
                metrics.payload_bytes.add(read.payload_bytes)
                metrics.bad_records.add(read.lost_count if not options.fail_on_data_loss else 0)


def to_record_batch(channel: str, batch: MessageColumns) -> pa.RecordBatch:
    rows = len(batch.sequence)
    arrays = [
        pa.array([channel] * rows, pa.string()),
        pa.array(batch.sequence, pa.int64()),
        pa.array(batch.subject, pa.string()),
        pa.array(batch.reply, pa.string()),
        pa.array(batch.data, pa.binary()),
        # Spark timestamps are microseconds; floor division like Spark's own conversion.
        pa.array([t // 1000 for t in batch.timestamp], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")
        ),
        pa.array(batch.timestamp, pa.int64()),
        pa.array(batch.redelivered, pa.bool_()),
        pa.array(batch.crc32, pa.int64()),
        pa.array([0] * rows, pa.int32()),  # no slice: the server served it
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class LiveStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the channels the options select; offsets {"channel": sequence}."""

    def __init__(self, options: LiveOptions, metrics: ReadMetrics | None) -> None:
        self.options = options
        self.metrics = metrics
        self.target: Offsets | None = None  # availableNow: nothing past this
        self.latest: Offsets = {}
        self.checked = False

    def _bounds(self, known: Sequence[str] = ()) -> dict[str, Any]:
        if not self.checked:  # once per query run: a down server or wrong ID fails fast
            check_connection(self.options.connection)
            self.checked = True
        bounds = channel_bounds(self.options, known)
        self.latest = {c: b.last for c, b in bounds.items()}
        return bounds

    def initialOffset(self) -> dict[str, int]:
        return starting_offsets(self.options.starting, self._bounds())

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        bounds = self._bounds(list(start))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return advance(start, bounds, max_rows, self.target)

    def reportLatestOffset(self) -> dict[str, int] | None:
        # Spark shows it beside endOffset in the query progress: lag = latest - end.
        return dict(self.latest) or None

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {c: b.last for c, b in self._bounds().items()}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return range_partitions(start, end, self.options.max_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_ranges(self.options, partition, self.metrics)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the server keeps no state for us (subscriptions are closed)."""


class LiveBatchReader(DataSourceReader):
    """``spark.read`` of a live server: (startingOffsets, endingOffsets] per channel."""

    def __init__(self, options: LiveOptions, metrics: ReadMetrics | None) -> None:
        self.options = options
        self.metrics = metrics

    def partitions(self) -> Sequence[InputPartition]:
        check_connection(self.options.connection)
        bounds = channel_bounds(self.options)
        start = starting_offsets(self.options.starting, bounds)
        end = ending_offsets(self.options.ending, bounds)
        end = {c: max(end[c], start.get(c, 0)) for c in end}
        return range_partitions(start, end, self.options.max_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_ranges(self.options, partition, self.metrics)
