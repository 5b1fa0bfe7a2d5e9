"""The ``stan`` sink: ``df.write.format("stan")`` and ``df.writeStream.format("stan")``
publish each row's ``data`` to its ``channel`` on a live STAN server.

Spark plans the write on the driver (``writer``/``streamWriter`` of the data source; for
a streaming write, with each micro-batch): options and columns are checked and the server
tried there, so a wrong option, column, server or cluster ID fails the job before any
task runs. Then ``write`` runs on the executors, once per partition: one connection per
task, rows in order, every PubAck awaited before the task reports success
(sink_publish.py). A failed task is retried by Spark and publishes its rows again: the
delivery is at least once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from stanpkg.pipeline.live_client import LiveSourceError, check_connection
from stanpkg.pipeline.options import OptionError
from stanpkg.pipeline.sink_options import SinkOptions
from stanpkg.pipeline.sink_publish import CHANNEL, DATA, SinkError, publish_batches

__all__ = ["SinkCommit", "StanBatchWriter", "StanStreamWriter", "plan_sink"]

log = logging.getLogger("stanpkg.pipeline")

ACCEPTED = (
    f"{DATA} (binary or string, required) and {CHANNEL} (string, optional: else option channel)"
)


@dataclass
class SinkCommit(WriterCommitMessage):
    """A task's report: all of these messages are on the server."""

    messages: int
    payload_bytes: int
    channels: tuple[str, ...]


def plan_sink(options: dict[str, str], schema: StructType) -> SinkOptions:
    """The sink's options, once its columns and the server are known to be right."""
    parsed = SinkOptions.parse(options)
    check_columns(schema, parsed)
    try:
        check_connection(parsed.connection)  # fail here, not in every task after its retries
    except LiveSourceError as exc:
        raise SinkError(str(exc)) from None
    return parsed


def check_columns(schema: StructType, options: SinkOptions) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    other = sorted(set(fields) - {DATA, CHANNEL})
    if other:
        raise OptionError(
            f"the stan sink does not take column(s) {', '.join(other)}: it takes {ACCEPTED}; "
            "select or rename the columns before writing"
        )
    if DATA not in fields:
        raise OptionError(f"missing column {DATA}: the stan sink takes {ACCEPTED}")
    if not isinstance(fields[DATA], BinaryType | StringType):
        raise OptionError(
            f"column {DATA}: expected binary or string, got {fields[DATA].simpleString()} "
            "(cast it, e.g. to_json(...) or cast(... as string))"
        )
    if CHANNEL in fields and not isinstance(fields[CHANNEL], StringType):
        raise OptionError(
            f"column {CHANNEL}: expected string, got {fields[CHANNEL].simpleString()}"
        )
    if CHANNEL not in fields and not options.channel:
        raise OptionError(
            f"channel: give option channel or a {CHANNEL} column (the stan sink takes {ACCEPTED})"
        )


def write_task(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    """One Spark task: publish its rows, return once all are acknowledged."""
    fail_after = None
    if options.fail_first_attempt_after is not None:
        context = TaskContext.get()
        if context is not None and context.attemptNumber() == 0:
            fail_after = options.fail_first_attempt_after
    result = publish_batches(options, batches, fail_after=fail_after)
    return SinkCommit(result.messages, result.payload_bytes, tuple(sorted(result.channels)))


def _log_commit(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    done = [m for m in messages if isinstance(m, SinkCommit)]
    channels = sorted({c for m in done for c in m.channels})
    log.info(
        "stan: %s: %d message(s) acknowledged on %d channel(s) by %d task(s)",
        what,
        sum(m.messages for m in done),
        len(channels),
        len(done),
    )


class StanBatchWriter(DataSourceArrowWriter):
    """``df.write.format("stan").mode("append")``."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task's messages were acknowledged before it finished."""
        _log_commit(messages, "write committed")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Published messages cannot be taken back: those of the tasks that finished stay."""
        _log_commit(messages, "write aborted; already published")


class StanStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("stan")``: each micro-batch's rows (in complete mode every
    trigger publishes the whole result again; Spark refuses update mode to Python sinks).
    Spark builds one for planning each micro-batch and one for committing it."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"micro-batch {batchId} committed")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"micro-batch {batchId} aborted (it runs again); already published")
