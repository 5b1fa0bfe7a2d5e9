"""Recovering the store's channels (filestore.md §10.1 step 5), possibly in parallel.

Each channel goes through the format's one channel recovery
(:func:`~stanpkg.stores.file.format.channel.recover_channel`, the one readers use too)
with the reference's recovery writes on. It is a plain function of picklable arguments
and results, so it runs in this process or in worker processes alike
(``parallel_recovery`` > 1 on a large store: index CRC checks and protobuf decoding are
CPU work the GIL would serialize). A damaged store never raises here: the failure comes
back as log lines plus the fatal text.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from dataclasses import dataclass, field

from stanpkg.stores.file.format.channel import (
    ChannelInfo,
    ChannelJob,
    ChannelRecoveryError,
    LogLine,
    recover_channel,
)
from stanpkg.stores.file.format.errors import (
    CorruptedRecordError,
    FileStoreError,
    RecordError,
    UnexpectedEOFError,
)

__all__ = [
    "ChannelResult",
    "RecoveryProgress",
    "record_error_lines",
    "recover_channels",
    "store_size",
]

# Worker processes are spawned (forking the running server is unsafe): each costs an
# interpreter start and imports, about half a second, which only pays for large stores.
PROCESS_THRESHOLD = 512 * 1024 * 1024
PROGRESS_INTERVAL = 2.0  # seconds between progress lines while recovering


@dataclass(frozen=True, slots=True)
class ChannelResult:
    """A channel recovered (``info``), or the fatal ``error`` text of its failure."""

    name: str
    info: ChannelInfo | None = None
    log: tuple[LogLine, ...] = ()
    error: str = ""


def record_error_lines(exc: FileStoreError, root: str) -> list[LogLine]:
    """The reference's ERR lines for a bad record (without truncate_bad_eof)."""
    if isinstance(exc, UnexpectedEOFError):
        return [("ERR", line) for line in exc.log_lines(root)]
    if isinstance(exc, CorruptedRecordError):
        return [("ERR", line) for line in exc.log_lines()]
    if isinstance(exc, RecordError):
        return [("ERR", line) for line in exc.dump_lines()]
    return []


def recover_for_store(
    job: ChannelJob, on_slice: Callable[[int], None] | None = None
) -> ChannelResult:
    """Recover one channel as the store does (``job.repair`` set), never raising."""
    try:
        info = recover_channel(job, on_slice=on_slice)
    except ChannelRecoveryError as exc:
        log = exc.log
        if isinstance(exc.cause, FileStoreError):
            log += record_error_lines(exc.cause, job.root)
        return ChannelResult(job.name, log=tuple(log), error=str(exc))
    return ChannelResult(job.name, info, info.log)


@dataclass
class RecoveryProgress:
    """Counts and the periodic progress line (large stores only)."""

    total_channels: int
    emit: Callable[[str], None]
    interval: float = PROGRESS_INTERVAL
    started: float = field(default_factory=time.monotonic)
    channels: int = 0
    messages: int = 0
    _next_report: float = 0.0

    def __post_init__(self) -> None:
        self._next_report = self.started + self.interval

    def add(self, channels: int, messages: int) -> None:
        self.channels += channels
        self.messages += messages
        now = time.monotonic()
        if now >= self._next_report:
            self._next_report = now + self.interval
            self.emit(
                f"Recovery in progress: {self.channels}/{self.total_channels} channels, "
                f"{self.messages:,} messages ({self.rate(now):,.0f} msgs/s)"
            )

    def rate(self, now: float | None = None) -> float:
        elapsed = (now or time.monotonic()) - self.started
        return self.messages / elapsed if elapsed > 0 else 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def recover_channels(
    jobs: list[ChannelJob],
    workers: int,
    progress: RecoveryProgress,
    use_processes: bool,
) -> Iterator[ChannelResult]:
    """Results in completion order; stops at the first failed channel (yielded last)."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            result = recover_for_store(job, lambda n: progress.add(0, n))
            progress.add(1, 0)
            yield result
            if result.error:
                return
        return
    executor: Executor
    if use_processes:
        executor = ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn")
        )
    else:
        executor = ThreadPoolExecutor(max_workers=min(workers, len(jobs)))
    try:
        pending: set[Future[ChannelResult]] = {
            executor.submit(recover_for_store, job) for job in jobs
        }
        while pending:
            done, pending = wait(pending, timeout=progress.interval, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                progress.add(1, result.info.scanned if result.info is not None else 0)
                yield result
                if result.error:
                    return
            if not done:
                progress.add(0, 0)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


def store_size(root: str, names: Iterable[str]) -> int:
    """Bytes of slice files under the channel directories (decides processes vs threads)."""
    total = 0
    for name in names:
        try:
            with os.scandir(os.path.join(root, name)) as entries:
                for entry in entries:
                    if entry.name.startswith("msgs.") and entry.is_file():
                        total += entry.stat().st_size
        except OSError:
            continue
    return total
