"""What the FILE store needs from the plan, resolved once so the store never looks at
the plan again (encryption is a wrapper around the store: see stores/encryption.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stanpkg.plan.limits import StoreLimits
from stanpkg.plan.model import Plan
from stanpkg.stores.file.format import SliceLimits

__all__ = ["CompactionPolicy", "FileStoreConfig", "config_from_plan"]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When clients.dat / subs.dat are rewritten (filestore.md §4.1, §5.3)."""

    enabled: bool = True
    fragmentation: int = 50  # percent
    interval_s: float = 300.0
    min_size: int = 1024 * 1024  # 0 = no minimum


@dataclass(frozen=True, slots=True)
class FileStoreConfig:
    root: str
    store_limits: StoreLimits
    cluster_id: str = ""
    discover_prefix: str = "_STAN.discover"
    crc_poly: int = 0xEDB88320
    do_crc: bool = True
    sync_on_flush: bool = True
    buffer_size: int = 2 * 1024 * 1024
    read_buffer_size: int = 2 * 1024 * 1024
    slice_limits: SliceLimits = field(default_factory=SliceLimits)
    archive_script: str = ""
    fds_limit: int = 0  # soft limit, 0 = none
    parallel_recovery: int = 1
    auto_sync_ns: int = 60_000_000_000  # <= 0 disables
    truncate_bad_eof: bool = False
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    lock_root: bool = True  # take .rootdir.lck (refuse a second server on the directory)


def config_from_plan(plan: Plan) -> FileStoreConfig:
    fo = plan.file_options
    return FileStoreConfig(
        root=plan.dir,
        store_limits=plan.store_limits,
        cluster_id=plan.cluster_id,
        discover_prefix=plan.discover_prefix,
        crc_poly=fo.crc_poly,
        do_crc=fo.crc,
        sync_on_flush=fo.sync_on_flush,
        buffer_size=fo.buffer_size,
        read_buffer_size=fo.read_buffer_size,
        slice_limits=SliceLimits(fo.slice_max_msgs, fo.slice_max_bytes, fo.slice_max_age),
        archive_script=fo.slice_archive_script,
        fds_limit=fo.file_descriptors_limit,
        parallel_recovery=max(1, fo.parallel_recovery),
        auto_sync_ns=fo.auto_sync,
        truncate_bad_eof=fo.truncate_bad_eof,
        compaction=CompactionPolicy(
            enabled=fo.compact_enabled,
            fragmentation=fo.compact_frag,
            interval_s=float(fo.compact_interval),
            min_size=fo.compact_min_size,
        ),
        # A fault-tolerant group shares the directory: the standby polls the lock.
        lock_root=not plan.ft_group,
    )
