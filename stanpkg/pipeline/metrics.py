"""The accumulators a registration of the ``stan`` data source fills: messages, payload
bytes and damaged records read, totalled on the driver. Shared by the batch source
(:mod:`.data_source`) and the live one (:mod:`.live_source`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stanpkg.pipeline.batches import SliceReadStats

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator

__all__ = ["ReadMetrics"]


@dataclass(frozen=True)
class ReadMetrics:
    """Accumulators filled by every read of a registration (driver-side totals)."""

    messages: Accumulator[int]
    payload_bytes: Accumulator[int]
    bad_records: Accumulator[int]

    def add(self, stats: SliceReadStats) -> None:
        self.messages.add(stats.messages)
        self.payload_bytes.add(stats.payload_bytes)
        self.bad_records.add(stats.bad_records)

    def snapshot(self) -> tuple[int, int, int]:
        return self.messages.value, self.payload_bytes.value, self.bad_records.value
