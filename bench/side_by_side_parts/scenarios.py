"""The workloads, one per row of issue 16's table: server flags (the same for the Go
reference and stanpkg) and Go ``stan-bench`` flags."""

from __future__ import annotations

from dataclasses import dataclass

MEMORY = ("-st", "memory")
FILE = ("-st", "file")
ONE_TO_ONE = ("-np", "1", "-ns", "1")
PUBLISH_ONLY = ("-np", "1", "-ns", "0")


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str  # the row of the issue, as the summary shows it
    server_args: tuple[str, ...]
    bench_args: tuple[str, ...]  # without -n and -ms, which come from msgs and msg_size
    msgs: int  # stan-bench -n: messages published in all (split between publishers)
    msg_size: int = 128
    metrics: tuple[str, ...] = ("pub", "sub")  # what the summary compares
    across_cores: bool = True  # False: run only at the most cores of --cores

    @property
    def uses_file_store(self) -> bool:
        return "file" in self.server_args

    @property
    def is_round_trip(self) -> bool:  # one publisher waiting for each PubAck, no subscriber
        return "-sync" in self.bench_args

    def bench_argv(self, max_msgs: int | None) -> list[str]:
        return [*self.bench_args, "-n", str(self.count(max_msgs)), "-ms", str(self.msg_size)]

    def count(self, max_msgs: int | None) -> int:
        return self.msgs if max_msgs is None else min(self.msgs, max_msgs)


# Counts are sized so that one round of everything takes about a minute per side here.
_ALL = (
    Scenario(
        "mem_async",
        "memory store, 1 pub + 1 sub, async (-mpa 16384)",
        MEMORY,
        (*ONE_TO_ONE, "-mpa", "16384"),
        200_000,
    ),
    Scenario(
        "mem_1k",
        "memory store, 1 KB, 1 pub + 1 sub (-mpa 16384)",
        MEMORY,
        (*ONE_TO_ONE, "-mpa", "16384"),
        100_000,
        msg_size=1024,
    ),
    # Both servers default to file_sync=true (an fsync per flush); "FILE store" without it
    # is the buffered store, the other row the default.
    Scenario(
        "file_nosync512",
        "FILE store, 1 pub + 1 sub, --file_sync=false (-mpa 512)",
        (*FILE, "--file_sync=false"),
        (*ONE_TO_ONE, "-mpa", "512"),
        150_000,
    ),
    Scenario(
        "file_async512",
        "FILE store with --file_sync=true (the default), 1 pub + 1 sub (-mpa 512)",
        (*FILE, "--file_sync=true"),
        (*ONE_TO_ONE, "-mpa", "512"),
        150_000,
    ),
    Scenario(
        "fanout",
        "fan-out, memory, 1 pub + 10 subs (-mpa 16384)",
        MEMORY,
        ("-np", "1", "-ns", "10", "-mpa", "16384"),
        50_000,
    ),
    Scenario(
        "pubsub10",
        "10 pubs + 10 subs on one channel, memory (-mpa 16384)",
        MEMORY,
        ("-np", "10", "-ns", "10", "-mpa", "16384"),
        50_000,
    ),
    Scenario(
        "mem_sync",
        "sync publish round trip, memory",
        MEMORY,
        (*PUBLISH_ONLY, "-sync"),
        4_000,
        metrics=("pub",),
    ),
    Scenario(
        "file_sync",
        "sync publish round trip, FILE (--file_sync=true)",
        FILE,
        (*PUBLISH_ONLY, "-sync"),
        1_500,
        metrics=("pub",),
    ),
    Scenario(
        "file_enc512",
        "FILE store + AES encryption, 1 pub + 1 sub (-mpa 512) (not in the issue)",
        (*FILE, "-encrypt", "-encryption_key", "bench"),
        (*ONE_TO_ONE, "-mpa", "512"),
        100_000,
    ),
    Scenario(
        "rss_1m",
        "RSS holding 1M × 128 B messages, memory store (lower is better)",
        MEMORY,
        (*PUBLISH_ONLY, "-mpa", "16384"),
        1_000_000,
        metrics=("rss_mb",),
        across_cores=False,  # memory held does not depend on cores; 1M publishes are long
    ),
)
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _ALL}
LOWER_IS_BETTER = frozenset({"rss_mb"})
