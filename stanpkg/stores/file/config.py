"""What the FILE store needs from the plan, resolved once so the store never looks at
the plan again (encryption is a wrapper around the store: see stores/encryption.py).

The file options are the plan's :class:`~stanpkg.plan.model.FileOptions`, whose values
(defaults included) come from the options table: this module repeats none of them. The
few values the store's parts read while running are derived from them once, when the
configuration is made, into plain attributes (the per-message modules are compiled, and
read them without a call)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stanpkg.plan.limits import StoreLimits
from stanpkg.plan.model import FileOptions, Plan
from stanpkg.stores.file.format import SliceLimits

__all__ = ["CompactionPolicy", "FileStoreConfig", "config_from_plan"]


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When clients.dat / subs.dat are rewritten (filestore.md §4.1, §5.3)."""

    enabled: bool
    fragmentation: int  # percent
    interval_s: float
    min_size: int  # 0 = no minimum


@dataclass(frozen=True, slots=True)
class FileStoreConfig:
    root: str
    store_limits: StoreLimits
    options: FileOptions
    cluster_id: str
    discover_prefix: str
    lock_root: bool  # take .rootdir.lck (refuse a second server on the directory)
    # Derived from ``options`` at construction (``dataclasses.replace`` derives them again).
    slice_limits: SliceLimits = field(init=False)
    compaction: CompactionPolicy = field(init=False)
    buffer_size: int = field(init=False)
    read_buffer_size: int = field(init=False)
    sync_on_flush: bool = field(init=False)

    def __post_init__(self) -> None:
        fo = self.options
        derived = {
            "slice_limits": SliceLimits(fo.slice_max_msgs, fo.slice_max_bytes, fo.slice_max_age),
            "compaction": CompactionPolicy(
                enabled=fo.compact_enabled,
                fragmentation=fo.compact_frag,
                interval_s=float(fo.compact_interval),
                min_size=fo.compact_min_size,
            ),
            "buffer_size": fo.buffer_size,
            "read_buffer_size": fo.read_buffer_size,
            "sync_on_flush": fo.sync_on_flush,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


def config_from_plan(plan: Plan) -> FileStoreConfig:
    return FileStoreConfig(
        root=plan.dir,
        store_limits=plan.store_limits,
        options=plan.file_options,
        cluster_id=plan.cluster_id,
        discover_prefix=plan.discover_prefix,
        # A fault-tolerant group shares the directory: the standby polls the lock.
        lock_root=not plan.ft_group,
    )
