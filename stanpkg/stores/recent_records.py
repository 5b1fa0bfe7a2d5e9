"""The records a channel stored last, kept in memory because deliveries read them at once.

The latest batch is always kept, earlier ones while under the caps, none once the channel
has been idle for ``idle_seconds`` (bounded memory with many channels).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["RecentRecords"]


class RecentRecords:
    __slots__ = ("first", "idle_seconds", "max_bytes", "max_msgs", "nbytes", "records", "stored_at")

    def __init__(self, max_msgs: int, max_bytes: int, idle_seconds: float) -> None:
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes
        self.idle_seconds = idle_seconds
        self.records: list[bytes] = []
        self.first = 0  # sequence of records[0]
        self.nbytes = 0
        self.stored_at = 0.0

    def remember(self, records: Sequence[bytes], first_seq: int, now: float) -> None:
        size = sum(map(len, records))
        kept = self.records
        if (
            self.first + len(kept) != first_seq
            or len(kept) + len(records) > self.max_msgs
            or self.nbytes + size > self.max_bytes
        ):
            self.records = list(records)
            self.first = first_seq
            self.nbytes = size
        else:
            kept.extend(records)
            self.nbytes += size
        self.stored_at = now

    def forget_before(self, sequence: int) -> None:
        """Drop the records of sequences below ``sequence`` (removed from the store)."""
        gone = min(sequence - self.first, len(self.records))
        if gone > 0:
            self.nbytes -= sum(map(len, self.records[:gone]))
            del self.records[:gone]
            self.first += gone

    def drop_if_idle(self, now: float) -> None:
        if self.records and now - self.stored_at >= self.idle_seconds:
            self.clear()

    def clear(self) -> None:
        self.records = []
        self.nbytes = 0
