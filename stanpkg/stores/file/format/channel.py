"""Recovering one channel directory (spec/filestore.md §10.1 step 5, §10.2).

The one routine every user of a FILE store goes through, so that the running store,
``stanpkg export`` and the Spark source always agree on what a channel holds: its slices,
the limits re-applied, the whole records written after the last index entry kept
(format/tail.py), its subscriptions. ``ChannelJob.repair`` decides whether the
reference's recovery writes are done (the store: index files rebuilt, zero tails cut) or
not (readers: a rebuilt index stays in memory, zero tails are only skipped).
``truncate_bad_eof`` (cutting a record cut short) is asked for separately.

A job and its result are picklable, so the store can recover channels in worker
processes.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from stanpkg.plan.limits import Limits
from stanpkg.stores.base import RecoveredSubscription
from stanpkg.stores.file.format.errors import (
    BadRecordHandler,
    FileStoreError,
    MissingDataFileError,
)
from stanpkg.stores.file.format.framing import IEEE_POLY, crc32_func
from stanpkg.stores.file.format.index import INDEX_RECORD, INDEX_RECORD_SIZE
from stanpkg.stores.file.format.limits import NO_LIMITS, apply_limits
from stanpkg.stores.file.format.slices import (
    RecoveredSlice,
    SliceInfo,
    check_data_files,
    discover_slices,
    recover_slice,
)
from stanpkg.stores.file.format.subsfile import SUBS_FILE, SubsReplay, replay_subs
from stanpkg.stores.file.format.tail import CUT_SHORT

__all__ = [
    "ChannelInfo",
    "ChannelJob",
    "ChannelRecoveryError",
    "LogLine",
    "recover_channel",
    "truncation_lines",
]

LogLine = tuple[str, str]  # (level: "INF" | "WRN" | "ERR", text)


@dataclass(frozen=True, slots=True)
class ChannelJob:
    """What recovering channel ``name`` of the datastore at ``root`` takes."""

    root: str
    name: str
    now_ns: int  # the clock of age expiration
    limits: Limits = NO_LIMITS  # the channel's effective limits, re-applied
    crc_poly: int = IEEE_POLY
    do_crc: bool = True
    truncate_bad_eof: bool = False  # cut a record cut short (else it is an error)
    repair: bool = False  # the reference's other recovery writes (see module doc)


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """A recovered channel. ``first_seq > last_seq`` when every message was removed;
    both are 0 for a channel that never had a message."""

    name: str
    path: str
    first_seq: int
    last_seq: int
    msg_count: int
    total_bytes: int  # FILE accounting: stored payload size + 40 per message
    slices: tuple[SliceInfo, ...]
    limits: Limits
    subs: SubsReplay | None = field(default=None, repr=False)
    # Slices still on disk whose messages were all removed by limits/expiry at recovery.
    removed_slices: tuple[SliceInfo, ...] = ()
    next_number: int = 1  # N of the next slice the channel would create
    # Per slice: its sequences (packed array "Q") when they have gaps, else None.
    positions: tuple[bytes | None, ...] = field(default=(), repr=False)
    log: tuple[LogLine, ...] = ()
    scanned: int = 0  # messages found in the slices (before limits)

    @property
    def subscriptions(self) -> Mapping[int, RecoveredSubscription]:
        return self.subs.subs if self.subs is not None else {}

    @property
    def max_sub_id(self) -> int:
        return self.subs.max_sub_id if self.subs is not None else 0

    def seqs(self, i: int) -> array[int] | None:
        """The sequences of ``slices[i]`` by position, when they have gaps."""
        packed = self.positions[i] if self.positions else None
        if packed is None:
            return None
        out = array("Q")
        out.frombytes(packed)
        return out


class ChannelRecoveryError(Exception):
    """Recovering a channel failed with ``cause``.

    ``file`` is the message file being recovered as the reference names it
    (``<channel>/msgs.N.idx``), None when the subscriptions file failed; ``log`` holds
    the lines logged before the failure. The text is the reference's.
    """

    def __init__(
        self,
        channel: str,
        cause: FileStoreError | OSError,
        log: Iterable[LogLine],
        file: str | None,
    ) -> None:
        self.channel = channel
        self.cause = cause
        self.log = list(log)
        self.file = file
        if file is None:
            text = f"unable to recover subscription store for [{channel}]: {cause}"
        else:
            text = f'unable to recover message store for [{channel}](file: "{file}"): {cause}'
        super().__init__(text)


def truncation_lines(lines: Iterable[str]) -> list[LogLine]:
    """Levels of the lines a recovery-time truncation logs (the last two are INF)."""
    out: list[LogLine] = []
    for line in lines:
        info = line == "Recovery resumes..." or (
            line.startswith('File "') and "has been truncated to offset" in line
        )
        out.append(("INF" if info else "WRN" if CUT_SHORT in line else "ERR", line))
    return out


def recover_channel(
    job: ChannelJob,
    *,
    on_slice: Callable[[int], None] | None = None,
    on_bad_record: BadRecordHandler | None = None,
) -> ChannelInfo:
    """Recover the channel; raises :class:`ChannelRecoveryError`.

    ``on_slice(count)`` is called after each non-empty slice (progress).
    ``on_bad_record`` tolerates damaged message records without writing (see
    ``recover_slice``); the subscriptions file stays strict.
    """
    log: list[LogLine] = []
    channel_dir = os.path.join(job.root, job.name)
    crc = crc32_func(job.crc_poly)
    opened = f"{job.name}/subs.dat"
    try:
        numbers = discover_slices(channel_dir)
        try:
            check_data_files(channel_dir, numbers)
        except MissingDataFileError as exc:
            opened = f"{job.name}/{os.path.basename(exc.path or '')}"
            raise
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
                    repair=job.repair,
                    on_bad_record=on_bad_record,
                    log=slice_log,
                )
            finally:
                log.extend(truncation_lines(slice_log))
            if rs.info.count:  # empty slices are not part of the channel
                recovered.append(rs)
                if on_slice is not None:
                    on_slice(rs.info.count)
        extent = apply_limits(
            [r.info for r in recovered], [r.index for r in recovered], job.limits, job.now_ns
        )
    except (FileStoreError, OSError) as exc:
        raise ChannelRecoveryError(job.name, exc, log, opened) from exc
    by_number = {r.info.number: r for r in recovered}
    subs_path = os.path.join(channel_dir, SUBS_FILE)
    subs: SubsReplay | None = None
    try:
        if os.path.exists(subs_path):
            subs = replay_subs(
                subs_path,
                crc=crc if job.do_crc else None,
                truncate_bad_eof=job.truncate_bad_eof,
                repair=job.repair,
            )
            log.extend(truncation_lines(subs.truncation_log))
    except (FileStoreError, OSError) as exc:
        raise ChannelRecoveryError(job.name, exc, log, None) from exc
    return ChannelInfo(
        name=job.name,
        path=channel_dir,
        first_seq=extent.first_seq,
        last_seq=extent.last_seq,
        msg_count=extent.count,
        total_bytes=extent.total_bytes,
        slices=extent.slices,
        limits=job.limits,
        subs=subs,
        removed_slices=extent.dropped,
        next_number=max(numbers, default=0) + 1,
        positions=tuple(
            None if sl.contiguous else _packed_seqs(by_number[sl.number]) for sl in extent.slices
        ),
        log=tuple(log),
        scanned=sum(r.info.count for r in recovered),
    )


def _packed_seqs(rs: RecoveredSlice) -> bytes:
    view = memoryview(rs.index)[4 : 4 + rs.info.count * INDEX_RECORD_SIZE]
    return array("Q", (rec[0] for rec in INDEX_RECORD.iter_unpack(view))).tobytes()
