"""When ``clients.dat`` or a ``subs.dat`` is rewritten (filestore.md §4.1, §5.3).

Both files follow the reference's one rule, in its order: compaction enabled, the file at
least ``compact_min_size``, at least ``compact_frag`` percent of its records deleted, and
``compact_interval`` since the file's last compaction. Each file keeps a
:class:`CompactionSchedule` and counts its records its own way."""

from __future__ import annotations

import time

from stanpkg.stores.file.config import CompactionPolicy

__all__ = ["CompactionSchedule"]


class CompactionSchedule:
    """One file's compaction rule and the time it was last compacted."""

    __slots__ = ("_last", "policy")

    def __init__(self, policy: CompactionPolicy) -> None:
        self.policy = policy
        self._last = float("-inf")  # the first compaction is not delayed

    def due(self, size: int, deleted: int, records: int) -> bool:
        """Whether a file of ``size`` bytes whose ``records`` include ``deleted`` deleted
        ones is compacted now; if so, now is its last compaction."""
        policy = self.policy
        if not policy.enabled:
            return False
        if policy.min_size > 0 and size < policy.min_size:
            return False
        fragmentation = deleted * 100 // records if records else 100
        if fragmentation < policy.fragmentation:
            return False
        now = time.monotonic()
        if now - self._last < policy.interval_s:
            return False
        self._last = now
        return True
