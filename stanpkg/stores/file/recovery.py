"""Recovering channels (filestore.md §10.1 step 5), possibly in parallel.

``recover_channel`` is a plain function of picklable arguments and results, so it runs in
this process or in worker processes alike (``parallel_recovery`` > 1 on a large store:
index CRC checks and protobuf decoding are CPU work the GIL would serialize). It does the
reference's recovery writes (index rebuilds, zero tails, truncations when asked) and
never raises for a damaged store: the failure comes back as log lines plus the fatal text.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from array import array
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

from stanpkg.stores.filestore import ChannelLimits, SliceReader, apply_limits
from stanpkg.stores.filestore.errors import (
    CorruptedRecordError,
    FileStoreError,
    RecordError,
    UnexpectedEOFError,
)
from stanpkg.stores.filestore.framing import crc32_func
from stanpkg.stores.filestore.index import INDEX_RECORD, INDEX_RECORD_SIZE
from stanpkg.stores.filestore.slices import (
    RecoveredSlice,
    SliceInfo,
    discover_slices,
    recover_slice,
)
from stanpkg.stores.filestore.subsfile import SUBS_FILE, SubsReplay, replay_subs
from stanpkg.stores.filestore.truncation import truncate_file

__all__ = [
    "ChannelJob",
    "ChannelResult",
    "LogLine",
    "record_error_lines",
    "recover_channel",
    "recover_channels",
]

LogLine = tuple[str, str]  # (level: "INF" | "WRN" | "ERR", text)
# Worker processes are spawned (forking the running server is unsafe): each costs an
# interpreter start and imports, about half a second, which only pays for large stores.
PROCESS_THRESHOLD = 512 * 1024 * 1024
PROGRESS_INTERVAL = 2.0  # seconds between progress lines while recovering
KEY_CHECK_MESSAGES = 16  # newest messages of each channel test-decrypted at recovery


@dataclass(frozen=True, slots=True)
class ChannelJob:
    root: str
    name: str
    limits: ChannelLimits
    now_ns: int
    crc_poly: int
    do_crc: bool
    truncate_bad_eof: bool
    key_hash: bytes | None


@dataclass(frozen=True, slots=True)
class ChannelResult:
    name: str
    first_seq: int = 0
    last_seq: int = 0
    count: int = 0
    total_bytes: int = 0
    slices: tuple[SliceInfo, ...] = ()
    # Packed sequences (array "Q") of the slices whose sequences have gaps, else None.
    positions: tuple[bytes | None, ...] = ()
    dropped: tuple[SliceInfo, ...] = ()  # fully removed slices, to delete or archive
    next_number: int = 1
    subs: SubsReplay | None = None
    log: tuple[LogLine, ...] = ()
    error: str = ""  # set when recovery failed: the fatal error text
    scanned: int = 0  # messages read from the slices (before limits)

    def seqs(self, i: int) -> array[int] | None:
        packed = self.positions[i] if self.positions else None
        if packed is None:
            return None
        out = array("Q")
        out.frombytes(packed)
        return out


def record_error_lines(exc: FileStoreError, root: str) -> list[LogLine]:
    """The reference's ERR lines for a bad record (without truncate_bad_eof)."""
    if isinstance(exc, UnexpectedEOFError):
        return [("ERR", line) for line in exc.log_lines(root)]
    if isinstance(exc, CorruptedRecordError):
        return [("ERR", line) for line in exc.log_lines()]
    if isinstance(exc, RecordError):
        return [("ERR", line) for line in exc.dump_lines()]
    return []


def truncation_lines(lines: Iterable[str]) -> list[LogLine]:
    """Levels of the lines a recovery-time truncation logs (the last two are INF)."""
    out: list[LogLine] = []
    for line in lines:
        info = line == "Recovery resumes..." or (
            line.startswith('File "') and "has been truncated to offset" in line
        )
        out.append(("INF" if info else "ERR", line))
    return out


def recover_channel(
    job: ChannelJob, on_slice: Callable[[int], None] | None = None
) -> ChannelResult:
    log: list[LogLine] = []
    channel_dir = os.path.join(job.root, job.name)
    crc = crc32_func(job.crc_poly)
    opened = f"{job.name}/subs.dat"

    def failed(exc: Exception, what: str) -> ChannelResult:
        if isinstance(exc, FileStoreError):
            log.extend(record_error_lines(exc, job.root))
        return ChannelResult(job.name, log=tuple(log), error=f"{what}: {exc}")

    try:
        numbers = discover_slices(channel_dir)
        recovered: list[RecoveredSlice] = []
        for number in numbers:
            opened = f"{job.name}/msgs.{number}.idx"  # the file the reference names
            slice_log: list[str] = []
            try:
                rs = recover_slice(
                    job.name,
                    channel_dir,
                    number,
                    crc=crc,
                    do_crc=job.do_crc,
                    truncate_bad_eof=job.truncate_bad_eof,
                    repair=True,
                    log=slice_log,
                )
            finally:
                log.extend(truncation_lines(slice_log))
            if rs.info.count:
                recovered.append(rs)
                if on_slice is not None:
                    on_slice(rs.info.count)
        if recovered:
            log.extend(_trim_unindexed_tail(recovered[-1]))
        extent = apply_limits(
            [r.info for r in recovered], [r.index for r in recovered], job.limits, job.now_ns
        )
        if job.key_hash is not None and extent.count:
            _check_key(job, extent.slices, extent.first_seq)
    except (FileStoreError, OSError) as exc:
        return failed(exc, f'unable to recover message store for [{job.name}](file: "{opened}")')
    by_number = {r.info.number: r for r in recovered}
    positions = tuple(
        None if sl.contiguous else _packed_seqs(by_number[sl.number]) for sl in extent.slices
    )
    subs_path = os.path.join(channel_dir, SUBS_FILE)
    subs: SubsReplay | None = None
    try:
        if os.path.exists(subs_path):
            check = crc if job.do_crc else None
            subs = replay_subs(subs_path, crc=check, truncate_bad_eof=job.truncate_bad_eof)
            log.extend(truncation_lines(subs.truncation_log))
            if subs.zero_tail_at is not None:
                truncate_file(subs_path, subs.zero_tail_at)
    except (FileStoreError, OSError) as exc:
        return failed(exc, f"unable to recover subscription store for [{job.name}]")
    return ChannelResult(
        job.name,
        first_seq=extent.first_seq,
        last_seq=extent.last_seq,
        count=extent.count,
        total_bytes=extent.total_bytes,
        slices=extent.slices,
        positions=positions,
        dropped=extent.dropped,
        next_number=max(numbers, default=0) + 1,
        subs=subs,
        log=tuple(log),
        scanned=sum(r.info.count for r in recovered),
    )


def _trim_unindexed_tail(rs: RecoveredSlice) -> list[LogLine]:
    """Cut data records written after the index's last entry from the write slice.

    They exist only after a crash between the data and index writes of a batch, so they
    were never acknowledged. The reference ignores them and appends after them, leaving
    a second record with the same sequence in the file; removing them keeps every
    sequence unique on disk.
    """
    last = rs.index[-INDEX_RECORD_SIZE:]
    _, offset, _, size, _ = INDEX_RECORD.unpack(last)
    end = offset + 8 + size
    path = rs.info.dat_path
    extra = os.path.getsize(path) - end
    if extra <= 0:
        return []
    truncate_file(path, end)
    return [
        (
            "WRN",
            f'File "{path}" held {extra} bytes after its last indexed message (a write '
            f"interrupted before it was acknowledged); truncated to offset: {end}",
        )
    ]


def _packed_seqs(rs: RecoveredSlice) -> bytes:
    view = memoryview(rs.index)[4 : 4 + rs.info.count * INDEX_RECORD_SIZE]
    return array("Q", (rec[0] for rec in INDEX_RECORD.iter_unpack(view))).tobytes()


def _check_key(job: ChannelJob, slices: tuple[SliceInfo, ...], first_seq: int) -> None:
    """Decrypt the channel's newest (and oldest) messages: a wrong key fails recovery
    with a clear error instead of every later delivery failing."""
    reader = SliceReader(crc_poly=job.crc_poly, do_crc=job.do_crc, key_hash=job.key_hash)
    last = slices[-1]
    lo = max(last.first_live_seq, last.last_seq - KEY_CHECK_MESSAGES + 1)
    for _ in reader.iter_messages(last, lo, last.last_seq):
        pass
    for sl in slices:
        if sl.live_count:
            reader.read_message(sl, first_seq)
            break


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
    jobs: list[ChannelJob], workers: int, progress: RecoveryProgress, use_processes: bool
) -> Iterator[ChannelResult]:
    """Results in completion order; stops at the first failed channel (yielded last)."""
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            result = recover_channel(job, lambda n: progress.add(0, n))
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
        pending: set[Future[ChannelResult]] = {executor.submit(recover_channel, j) for j in jobs}
        while pending:
            done, pending = wait(pending, timeout=progress.interval, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                progress.add(1, result.scanned)
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
