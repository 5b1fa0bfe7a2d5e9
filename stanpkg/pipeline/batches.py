"""Reading one slice task into Arrow record batches (runs on Spark executors).

Batches are built column-wise and handed to Spark as Arrow, which skips Spark's per-row
Python conversion (the dominant cost when rows are yielded as tuples).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa

from stanpkg.pipeline.planning import SliceTask
from stanpkg.stores.file.format import FileStoreError, SliceInfo, SliceReader, StoredMessage

__all__ = ["ARROW_SCHEMA", "COLUMNS", "SliceReadStats", "read_task_batches"]

log = logging.getLogger("stanpkg.pipeline")

# (name, Arrow type); the Spark schema in data_source.py is derived from the same list.
COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("channel", pa.string()),
    ("sequence", pa.int64()),
    ("subject", pa.string()),
    ("reply", pa.string()),
    ("data", pa.binary()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestamp_ns", pa.int64()),
    ("redelivered", pa.bool_()),
    ("crc32", pa.int64()),
    ("slice", pa.int32()),
)
ARROW_SCHEMA = pa.schema([pa.field(name, kind, nullable=False) for name, kind in COLUMNS])
_BATCH_BYTES = 32 * 1024 * 1024  # payload bytes per batch, so huge messages stay bounded


@dataclass
class SliceReadStats:
    messages: int = 0
    payload_bytes: int = 0
    bad_records: int = 0
    first_bad: str = ""


def read_task_batches(
    task: SliceTask,
    reader: SliceReader,
    *,
    permissive: bool,
    batch_rows: int = 8192,
    stats: SliceReadStats | None = None,
) -> Iterator[pa.RecordBatch]:
    """The task's messages as record batches of at most ``batch_rows`` rows."""
    stats = stats if stats is not None else SliceReadStats()

    def skip(error: FileStoreError) -> None:
        stats.bad_records += 1
        if not stats.first_bad:
            stats.first_bad = str(error)

    messages = _iter_task(task, reader, skip if permissive else None)
    channel = task.slice.channel
    while True:
        batch, payload = _collect(messages, batch_rows)
        if not batch:
            break
        stats.messages += len(batch)
        stats.payload_bytes += payload
        yield _to_record_batch(channel, batch)
    if stats.bad_records:
        log.warning(
            "stan: skipped %d damaged record(s) of %s (first: %s)",
            stats.bad_records,
            task.slice.dat_path,
            stats.first_bad,
        )


def _iter_task(
    task: SliceTask, reader: SliceReader, on_bad: Callable[[FileStoreError], None] | None
) -> Iterator[StoredMessage]:
    info = _locate(task)
    lo_ns, hi_ns = task.from_time_ns, task.to_time_ns
    for msg in reader.iter_messages(info, task.from_seq, task.to_seq, on_bad_record=on_bad):
        ts = msg.timestamp
        if (lo_ns is not None and ts < lo_ns) or (hi_ns is not None and ts > hi_ns):
            continue
        yield msg


def _locate(task: SliceTask) -> SliceInfo:
    """The slice at its planned place, or where the server/archive script moved it."""
    info = task.slice
    if os.path.exists(info.dat_path):
        return info
    for dat, idx in task.fallbacks:
        if os.path.exists(dat):
            # A moved index may be missing: fall back to scanning the data file then.
            return replace(info, dat_path=dat, idx_path=idx, index_usable=os.path.exists(idx))
    raise FileStoreError(
        "slice file not found (was the slice removed while the query ran?)",
        path=info.dat_path,
    )


def _collect(messages: Iterator[StoredMessage], limit: int) -> tuple[list[StoredMessage], int]:
    batch: list[StoredMessage] = []
    payload = 0
    for msg in messages:
        batch.append(msg)
        payload += len(msg.data)
        if len(batch) >= limit or payload >= _BATCH_BYTES:
            break
    return batch, payload


def _to_record_batch(channel: str, batch: list[StoredMessage]) -> pa.RecordBatch:
    # StoredMessage fields: sequence, subject, reply, data, timestamp, redelivered, crc32,
    # slice, offset.
    sequence, subject, reply, data, ts, redelivered, crc, number, _ = zip(*batch, strict=True)
    ts_ns = pa.array(ts, pa.int64())
    arrays = [
        pa.array([channel] * len(batch), pa.string()),
        pa.array(sequence, pa.int64()),
        pa.array(subject, pa.string()),
        pa.array(reply, pa.string()),
        pa.array(data, pa.binary()),
        # Spark timestamps are microseconds; floor division like Spark's own conversion.
        pa.array([t // 1000 for t in ts], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        ts_ns,
        pa.array(redelivered, pa.bool_()),
        pa.array(crc, pa.int64()),
        pa.array(number, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
