"""Samples and the report of ``stanpkg bench``, formatted like the Go ``nats.go/bench`` package
that the reference ``stan-bench`` prints with (``Pub stats: 10,000 msgs/sec ~ 1.22 MB/sec``).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field

from stanpkg.transport.nuid import next_nuid


def comma_format(n: int) -> str:
    return f"{n:,}"


def human_bytes(value: float, si: bool = False) -> str:
    base = 1000 if si else 1024
    prefixes = ("k", "M", "G", "T", "P", "E") if si else ("K", "M", "G", "T", "P", "E")
    suffix = "iB" if si else "B"
    if value < base:
        return f"{value:.2f} B"
    exp = min(int(math.log(value) / math.log(base)), len(prefixes))
    return f"{value / base**exp:.2f} {prefixes[exp - 1]}{suffix}"


@dataclass
class Sample:
    """One client's run: ``job_msgs`` messages of ``msg_size`` bytes between start and end."""

    job_msgs: int
    msg_size: int
    start: float
    end: float
    io_msgs: int = 0  # protocol messages in + out on the client's connection
    total_bytes: int | None = None  # for aggregates: the sum of the members' bytes

    @property
    def msg_bytes(self) -> int:
        return self.job_msgs * self.msg_size if self.total_bytes is None else self.total_bytes

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)

    @property
    def rate(self) -> int:
        return int(self.job_msgs / self.seconds)

    @property
    def throughput(self) -> float:
        return self.msg_bytes / self.seconds

    def __str__(self) -> str:
        return f"{comma_format(self.rate)} msgs/sec ~ {human_bytes(self.throughput)}/sec"


@dataclass
class SampleGroup:
    samples: list[Sample] = field(default_factory=list)

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)

    @property
    def aggregate(self) -> Sample:
        """All samples as one: summed messages and bytes over the overall time span."""
        return Sample(
            job_msgs=sum(s.job_msgs for s in self.samples),
            msg_size=0,
            start=min(s.start for s in self.samples),
            end=max(s.end for s in self.samples),
            total_bytes=sum(s.msg_bytes for s in self.samples),
        )

    def statistics(self) -> str:
        rates = [s.rate for s in self.samples]
        avg = sum(rates) // len(rates)
        stddev = math.sqrt(sum((r - avg) ** 2 for r in rates) / len(rates))
        return (
            f"min {comma_format(min(rates))} | avg {comma_format(avg)} | "
            f"max {comma_format(max(rates))} | stddev {comma_format(int(stddev))} msgs"
        )


class Benchmark:
    def __init__(self, name: str) -> None:
        self.name = name
        self.run_id = next_nuid()
        self.pubs = SampleGroup()
        self.subs = SampleGroup()

    def report(self) -> str:
        if not self.pubs.samples and not self.subs.samples:
            return "No publisher or subscribers. Nothing to report."
        out = io.StringIO()
        indent = ""
        if self.pubs.samples and self.subs.samples:
            everything = SampleGroup(self.pubs.samples + self.subs.samples).aggregate
            out.write(f"{self.name} Pub/Sub stats: {everything}\n")
            indent = " "
        for label, group in (("Pub", self.pubs), ("Sub", self.subs)):
            if not group.samples:
                continue
            out.write(f"{indent}{label} stats: {group.aggregate}\n")
            if len(group.samples) > 1:
                for i, sample in enumerate(group.samples, 1):
                    out.write(f"{indent} [{i}] {sample} ({sample.job_msgs} msgs)\n")
                out.write(f"{indent} {group.statistics()}\n")
        return out.getvalue()

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [
                "#RunID",
                "ClientID",
                "MsgCount",
                "MsgBytes",
                "MsgsPerSec",
                "BytesPerSec",
                "DurationSecs",
            ]
        )
        for prefix, group in (("S", self.subs), ("P", self.pubs)):
            for i, s in enumerate(group.samples):
                writer.writerow(
                    [
                        self.run_id,
                        f"{prefix}{i}",
                        s.io_msgs,
                        s.msg_bytes,
                        s.rate,
                        f"{s.throughput:f}",
                        f"{s.seconds:f}",
                    ]
                )
        return out.getvalue()
