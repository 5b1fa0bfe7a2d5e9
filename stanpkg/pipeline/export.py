"""Incremental export of a FILE store's messages (``stanpkg export``).

A run: load the state (last exported sequence per channel), plan the read on the driver
with the data source's own planner (nothing new: stop before starting Spark), read the
new messages up to the sequences planned (a fixed snapshot, so messages stored during
the run wait for the next one), append them partitioned by ``channel`` and ``date``
(UTC day of the message), then record the new state. Spark's commit protocol makes the
data of a failed run invisible, and the state is written only after the commit, so a
failure never skips messages; a crash between the two exports the run's messages again
(at-least-once: deduplicate on ``channel, sequence`` if that matters).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from stanpkg.pipeline.options import ReadOptions
from stanpkg.pipeline.planning import plan_read
from stanpkg.pipeline.progress import PeriodicProgress, slices_done
from stanpkg.pipeline.state import ExportState, StateStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from stanpkg.pipeline.metrics import ReadMetrics

__all__ = ["FORMATS", "ExportJob", "ExportRequest", "ExportResult", "prepare_export", "run_export"]

FORMATS = ("parquet", "json", "csv")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ExportRequest:
    out: str
    datastore: str | None = None
    config: str | None = None
    channels: str | None = None
    format: str = "parquet"
    encryption_key: bytes | None = field(default=None, repr=False)
    # By default exactly what the server serves; these add what it no longer serves but
    # still has on disk (removed by limits) / in the archive (discarded slices).
    include_removed: bool = False
    include_archived: bool = False
    archive_dir: str | None = None
    permissive: bool = False

    def source_options(self) -> dict[str, str]:
        opts = {
            "includeRemoved": str(self.include_removed).lower(),
            "includeArchived": str(self.include_archived).lower(),
            "mode": "PERMISSIVE" if self.permissive else "FAILFAST",
        }
        for key, value in (
            ("path", self.datastore),
            ("config", self.config),
            ("channels", self.channels),
            ("archiveDir", self.archive_dir),
        ):
            if value:
                opts[key] = value
        if self.encryption_key:
            opts["encryptionKey"] = self.encryption_key.decode("utf-8", "surrogateescape")
        return opts


@dataclass
class ExportJob:
    """A planned run: per channel, the inclusive sequence range to export."""

    request: ExportRequest
    state: ExportState
    ranges: dict[str, tuple[int, int]]
    slices: int
    max_messages: int
    cluster_id: str | None
    warnings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.ranges


@dataclass(frozen=True)
class ExportResult:
    messages: int
    payload_bytes: int
    seconds: float
    bad_records: int
    channels: int

    def summary(self) -> str:
        rate = self.messages / self.seconds if self.seconds > 0 else 0.0
        mb = self.payload_bytes / 1e6
        return (
            f"exported {self.messages:,} messages ({mb:,.1f} MB) from {self.channels} "
            f"channel{'s' if self.channels != 1 else ''} in {self.seconds:.1f} s: "
            f"{rate:,.0f} msg/s, {mb / self.seconds if self.seconds > 0 else 0:,.1f} MB/s"
            + (f", {self.bad_records} damaged record(s) skipped" if self.bad_records else "")
        )


def prepare_export(request: ExportRequest, store: StateStore) -> ExportJob:
    """Plan a run on the driver (no Spark): what is new since the last run."""
    if request.format not in FORMATS:
        raise ValueError(f"unknown format {request.format!r} (expected {', '.join(FORMATS)})")
    state = store.load()
    options = ReadOptions.parse(request.source_options())
    options = _after_state(options, state)
    plan = plan_read(options)
    if state.cluster_id and plan.cluster_id and state.cluster_id != plan.cluster_id:
        raise ValueError(
            f"{request.out} holds an export of cluster {state.cluster_id!r}, "
            f"this datastore is cluster {plan.cluster_id!r}"
        )
    ranges: dict[str, tuple[int, int]] = {}
    for task in plan.tasks:
        lo, hi = ranges.get(task.slice.channel, (task.from_seq, task.to_seq))
        ranges[task.slice.channel] = (min(lo, task.from_seq), max(hi, task.to_seq))
    warnings = list(plan.log)
    for channel, last in sorted(state.channels.items()):
        current = plan.channel_last_sequences.get(channel)
        if current is not None and current < last:
            warnings.append(
                f"channel {channel}: last sequence {current} is below the last exported "
                f"sequence {last} (was the channel deleted and created again?); nothing "
                f"of it is exported until it passes {last} (remove it from the state to "
                "export it from the start)"
            )
    return ExportJob(
        request=request,
        state=state,
        ranges=ranges,
        slices=len(plan.tasks),
        max_messages=sum(t.max_messages for t in plan.tasks),
        cluster_id=plan.cluster_id,
        warnings=warnings,
    )


def _after_state(options: ReadOptions, state: ExportState) -> ReadOptions:
    starting = {channel: last + 1 for channel, last in state.channels.items()}
    return replace(options, starting_sequences=starting)


def run_export(
    spark: SparkSession,
    job: ExportJob,
    store: StateStore,
    progress: Progress,
    *,
    progress_every: float = 0.0,
) -> ExportResult:
    """Read, write and commit the planned run; the state is saved after the data.
    ``progress_every`` > 0: a progress line that often while Spark works (for logs, where
    Spark's console bar is not shown)."""
    from stanpkg.pipeline.data_source import register

    request = job.request
    registration = register(spark)
    before = registration.metrics.snapshot() if registration.metrics else (0, 0, 0)
    options = request.source_options()
    options["startingSequences"] = json.dumps({c: lo for c, (lo, _) in job.ranges.items()})
    options["endingSequences"] = json.dumps({c: hi for c, (_, hi) in job.ranges.items()})
    options["channels"] = json.dumps(sorted(job.ranges))
    started = time.monotonic()
    frame = spark.read.format("stan").options(**options).load()
    progress(
        f"exporting up to {job.max_messages:,} messages of {len(job.ranges)} channel(s) "
        f"from {job.slices} slice(s) to {request.out} ({request.format})"
    )
    describe = _progress_line(spark, job, registration.metrics, before[0])
    with PeriodicProgress(progress, describe, progress_every):
        _writable(frame, request.format).write.mode("append").partitionBy("channel", "date").format(
            request.format
        ).save(request.out)
    seconds = time.monotonic() - started
    after = registration.metrics.snapshot() if registration.metrics else before

    state = job.state
    state.channels.update({c: hi for c, (_, hi) in job.ranges.items()})
    state.cluster_id = state.cluster_id or job.cluster_id
    state.datastore = request.datastore or request.config or state.datastore
    store.save(state)
    return ExportResult(
        messages=after[0] - before[0],
        payload_bytes=after[1] - before[1],
        seconds=seconds,
        bad_records=after[2] - before[2],
        channels=len(job.ranges),
    )


def _progress_line(
    spark: SparkSession, job: ExportJob, metrics: ReadMetrics | None, before: int
) -> Callable[[], str]:
    context = getattr(spark, "sparkContext", None)  # absent with Spark Connect

    def describe() -> str:
        done, total = slices_done(context)
        read = metrics.snapshot()[0] - before if metrics is not None else 0
        share = f" ({100 * read // job.max_messages}%)" if job.max_messages else ""
        slices = f", {done}/{total} slice(s) done" if total else ""
        return f"progress: {read:,} of up to {job.max_messages:,} messages read{share}{slices}"

    return describe


def _writable(frame: DataFrame, fmt: str) -> DataFrame:
    """Add the UTC ``date`` partition column; CSV cannot hold binary, so base64 there."""
    from pyspark.sql import functions as F

    # From timestamp_ns, so the day does not depend on the session's time zone.
    day = F.date_add(
        F.lit("1970-01-01").cast("date"), F.floor(F.col("timestamp_ns") / 86.4e12).cast("int")
    )
    frame = frame.withColumn("date", day.cast("date"))
    if fmt == "csv":
        frame = frame.withColumn("data", F.base64("data"))
    return frame
