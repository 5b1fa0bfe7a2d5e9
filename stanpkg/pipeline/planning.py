"""Planning a read: which slices to read, and which sequence range of each.

Runs where Spark plans the query. The datastore is recovered with the shared FILE store
reader (``open_datastore``: limits re-applied, nothing written), then every slice that can
hold a wanted message becomes one task (one Spark partition). Pruning uses what recovery
already knows from the index files: each slice's first/last sequence and timestamps.
Time pruning assumes timestamps grow with sequences, which holds because the server
stamps messages as it stores them; rows are still filtered exactly when read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from stanpkg.pipeline.archive_layout import (
    ArchivedSlice,
    archive_paths,
    find_archived_slices,
    find_bak_slices,
)
from stanpkg.pipeline.options import ReadOptions
from stanpkg.stores.file.format import (
    FileStoreError,
    SliceInfo,
    SliceReader,
    crc32_func,
    open_datastore,
    recover_slice,
)

__all__ = ["ReadPlan", "SliceTask", "plan_read"]

LIVE, REMOVED, ARCHIVED = "live", "removed", "archived"


@dataclass(frozen=True)
class SliceTask:
    """One slice to read, clipped to ``from_seq..to_seq`` (inclusive)."""

    slice: SliceInfo
    from_seq: int
    to_seq: int
    from_time_ns: int | None = None
    to_time_ns: int | None = None
    origin: str = LIVE
    # Where the files may be found if they move while the query runs (the server renames
    # a discarded slice to .bak and the archive script moves it on).
    fallbacks: tuple[tuple[str, str], ...] = ()

    @property
    def max_messages(self) -> int:
        return self.to_seq - self.from_seq + 1


@dataclass
class ReadPlan:
    tasks: list[SliceTask]
    reader: SliceReader
    cluster_id: str | None = None
    # Per channel: the highest sequence a task may return (export's "up to" mark).
    last_sequences: dict[str, int] = field(default_factory=dict)
    # Per selected channel of the datastore: its last sequence as recovered.
    channel_last_sequences: dict[str, int] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    @property
    def channels(self) -> list[str]:
        return sorted({t.slice.channel for t in self.tasks})


def plan_read(options: ReadOptions) -> ReadPlan:
    """Recover the datastore and list the slice tasks of a read, in channel/slice order."""
    log: list[str] = []
    skipped: list[str] = []  # reported after recovery's own log lines

    def note_bad_record(error: FileStoreError) -> None:
        skipped.append(f"skipping damaged record: {error}")

    on_bad_record = note_bad_record if options.permissive else None
    ds = open_datastore(
        options.path,
        encryption_key=options.encryption_key,
        limits=options.store_limits,
        do_crc=options.do_crc,
        crc_poly=options.crc_poly,
        on_bad_record=on_bad_record,
        select_channels=options.wants_channel,
    )
    log.extend(ds.log)
    log.extend(skipped)
    skipped.clear()
    tasks: list[SliceTask] = []
    for name, channel in sorted(ds.channels.items()):
        if not options.wants_channel(name):
            continue
        slices: Iterable[tuple[SliceInfo, str]] = [(s, LIVE) for s in channel.slices]
        if options.include_removed:
            # Read each slice from its first record, not from the channel's first sequence.
            slices = [(s, REMOVED) for s in channel.removed_slices] + [
                (replace(s, removed=0), LIVE) for s in channel.slices
            ]
        for info, origin in slices:
            bak = (info.dat_path + ".bak", info.idx_path + ".bak")
            moved = archive_paths(options.archive_dir, name, info.number)
            _add_task(tasks, options, info, origin, (bak, moved))
    if options.include_archived:
        known = {(t.slice.channel, t.slice.number) for t in tasks}
        for archived in _archived_slices(options, known):
            info = recover_slice(
                archived.channel,
                "",
                archived.number,
                crc=crc32_func(options.crc_poly),
                do_crc=options.do_crc,
                paths=(archived.dat_path, archived.idx_path),
                on_bad_record=on_bad_record,
            ).info
            if info.count:
                _add_task(tasks, options, info, ARCHIVED, ())
    log.extend(skipped)
    tasks.sort(key=lambda t: (t.slice.channel, t.slice.first_seq, t.slice.number))
    last: dict[str, int] = {}
    for task in tasks:
        last[task.slice.channel] = max(last.get(task.slice.channel, 0), task.to_seq)
    channel_last = {name: channel.last_seq for name, channel in ds.channels.items()}
    return ReadPlan(tasks, ds.reader, ds.cluster_id, last, channel_last, log)


def _add_task(
    tasks: list[SliceTask],
    options: ReadOptions,
    info: SliceInfo,
    origin: str,
    fallbacks: tuple[tuple[str, str], ...],
) -> None:
    lo, hi = options.sequence_range(info.channel)
    lo = max(lo, info.first_live_seq)
    hi = min(hi, info.last_seq)
    if info.live_count <= 0 or lo > hi:
        return
    if options.from_time_ns is not None and info.last_timestamp < options.from_time_ns:
        return
    if options.to_time_ns is not None and info.first_timestamp > options.to_time_ns:
        return
    tasks.append(
        SliceTask(info, lo, hi, options.from_time_ns, options.to_time_ns, origin, fallbacks)
    )


def _archived_slices(options: ReadOptions, known: set[tuple[str, int]]) -> list[ArchivedSlice]:
    """Archived slices of the selected channels; the archive's copy wins over a .bak."""
    chosen: dict[tuple[str, int], ArchivedSlice] = {}
    for archived in find_bak_slices(options.path) + find_archived_slices(options.archive_dir):
        key = (archived.channel, archived.number)
        if key not in known and options.wants_channel(archived.channel):
            chosen[key] = archived
    return [chosen[k] for k in sorted(chosen)]
