"""How much a monitoring scrape costs with many channels and subscriptions.

Runs, in this process, an embedded nats-server, a streaming server (MEMORY store, no
channel or subscription limits) and its monitor; fills it through the real protocol
(one message per channel, then subscriptions: plain, durable, queue and durable queue,
each with one unacknowledged message pending); then measures:

* ``collect``: reading the state for /metrics on the event loop (paced, see
  stanpkg/monitor/pacing.py), ``render`` / ``render_gzip``: writing the text (worker
  thread in production, timed here directly);
* ``GET /metrics`` (gzip, as Prometheus asks, and plain) end to end over HTTP, with the
  longest stall of the server's event loop seen meanwhile (a 1 ms ticker);
* the JSON endpoints: serverz, channelsz?subs=1 for every channel, clientsz?subs=1;
* optionally (``--compare-prometheus-client``) prometheus_client's ``generate_latest``
  on the same samples, for the record.

Usage: ``python bench/monitor/scrape_bench.py [--channels 10000] [--subs 100000]
[--clients 100] [--repeat 3] [--compare-prometheus-client]``. One JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import json
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from stanpkg.monitor import metrics
from stanpkg.monitor.pacing import gc_paused, release
from stanpkg.monitor.service import MonitorConfig, MonitorServer
from stanpkg.node import GO_VERSION, VERSION
from stanpkg.plan.compile import compile_args
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.log import Logger
from stanpkg.server.modes import mode_for
from stanpkg.server.monitoring_views import ServerView
from stanpkg.server.server import StreamingServer
from stanpkg.stores.memory import MemoryStore
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.embedded import EmbeddedNatsConfig, EmbeddedNatsServer
from stanpkg.transport.endpoint import NatsEndpoint
from stanpkg.transport.nuid import Nuid

CLUSTER_ID = "scrape-bench"
CONCURRENCY = 2000


class LoopLag:
    """The longest time the event loop could not run a 1 ms timer, and the full
    (generation 2) garbage collections meanwhile: they stop every thread."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.full_gcs: list[float] = []
        self._gc_start = 0.0
        self._task: asyncio.Task[None] | None = None

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.full_gcs.append(time.perf_counter() - self._gc_start)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(0.001)
            self.worst = max(self.worst, loop.time() - start - 0.001)

    def __enter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        gc.callbacks.remove(self._on_gc)


async def _bounded(jobs: list[Callable[[], Awaitable[Any]]]) -> None:
    for start in range(0, len(jobs), CONCURRENCY):
        await asyncio.gather(*(job() for job in jobs[start : start + CONCURRENCY]))


async def populate(nc: NatsConnection, channels: int, subs: int, clients: int) -> None:
    nuid = Nuid()
    discover = f"_STAN.discover.{CLUSTER_ID}"
    nc.subscribe("_BENCH_HB.>", lambda _s, reply, _p: reply and nc.publish(reply, b""))
    conns: list[tuple[str, bytes, pb.ConnectResponse]] = []
    for i in range(clients):
        client_id, conn_id = f"client-{i:04d}", nuid.next().encode()
        req = pb.ConnectRequest(
            clientID=client_id, heartbeatInbox=f"_BENCH_HB.{i}", protocol=1, connID=conn_id
        )
        raw = await nc.request(discover, req.SerializeToString(), 5)
        conns.append((client_id, conn_id, pb.ConnectResponse.FromString(raw)))
    names = [f"bench.{i // 100:03d}.chan-{i:05d}" for i in range(channels)]

    def publish(i: int) -> Callable[[], Awaitable[bytes]]:
        client_id, conn_id, resp = conns[i % clients]
        pm = pb.PubMsg(
            clientID=client_id, connID=conn_id, guid=nuid.next(), subject=names[i], data=b"x" * 64
        )
        return lambda: nc.request(f"{resp.pubPrefix}.{names[i]}", pm.SerializeToString(), 30)

    await _bounded([publish(i) for i in range(channels)])

    def subscribe(i: int) -> Callable[[], Awaitable[bytes]]:
        client_id, _, resp = conns[i % clients]
        kind = i % 20  # 14 plain, 3 durable, 2 queue, 1 durable queue
        req = pb.SubscriptionRequest(
            clientID=client_id,
            subject=names[i % channels],
            inbox=f"_BENCH_SUB.{i}",
            maxInFlight=1024,
            ackWaitInSecs=3600,
            startPosition=pb.First,
            durableName=f"dur-{i}" if kind in (14, 15, 16, 19) else "",
            qGroup=f"group-{i % 7}" if kind in (17, 18, 19) else "",
        )
        return lambda: nc.request(resp.subRequests, req.SerializeToString(), 60)

    await _bounded([subscribe(i) for i in range(subs)])


async def timed(
    label: str, results: dict[str, Any], repeat: int, job: Callable[[], Awaitable[int]]
) -> None:
    times, lags, gcs, size = [], [], [], 0
    for _ in range(repeat):
        with LoopLag() as lag:
            start = time.perf_counter()
            size = await job()
            times.append(time.perf_counter() - start)
            await asyncio.sleep(0.01)  # let the ticker see the end of the job
        lags.append(lag.worst)
        gcs.extend(lag.full_gcs)
    results[label] = {
        "seconds_median": round(statistics.median(times), 3),
        "seconds_best": round(min(times), 3),
        "loop_stall_ms_max": round(max(lags) * 1000, 1),
        "full_gc_runs": len(gcs),
        "full_gc_ms_max": round(max(gcs, default=0) * 1000, 1),
        "bytes": size,
    }


def prometheus_client_seconds(snapshot: metrics.MetricsSnapshot) -> float:
    """prometheus_client's generate_latest for the same channel/subscription samples."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    class Collector:
        def collect(self) -> Any:
            for family, value_of in metrics.SUBSCRIPTION_FAMILIES:
                gauge = GaugeMetricFamily(
                    family.name,
                    family.help,
                    labels=[
                        "server_id",
                        "server_role",
                        "channel",
                        "client_id",
                        "inbox",
                        "queue_name",
                        "is_durable",
                        "is_offline",
                        "durable_name",
                    ],
                )
                for channel, subs in snapshot.channels:
                    for sub in subs:
                        gauge.add_metric(
                            [
                                snapshot.server_id,
                                "",
                                channel.name,
                                sub.client_id,
                                sub.inbox,
                                sub.queue_name,
                                str(sub.is_durable).lower(),
                                str(sub.is_offline).lower(),
                                sub.durable_name,
                            ],
                            value_of(sub),
                        )
                yield gauge

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    start = time.perf_counter()
    generate_latest(registry)
    return time.perf_counter() - start


async def main(args: argparse.Namespace) -> dict[str, Any]:
    nats = EmbeddedNatsServer(
        EmbeddedNatsConfig(host="127.0.0.1", port=-1),
        on_log=lambda _l: None,
        on_exit=lambda _c: None,
    )
    await nats.start()
    plan = compile_args(["-cid", CLUSTER_ID, "-mc", "0", "-msu", "0"], env={}).plan
    assert plan is not None
    log = Logger(logtime=True)
    server = StreamingServer(plan, MemoryStore(plan.store_limits, log), log, mode=mode_for(plan))
    await server.start(NatsEndpoint(nats.client_url))
    client = await NatsConnection.connect(nats.client_url, name="bench")
    results: dict[str, Any] = {"channels": args.channels, "subscriptions": args.subs}
    try:
        start = time.perf_counter()
        await populate(client, args.channels, args.subs, args.clients)
        results["populate_seconds"] = round(time.perf_counter() - start, 1)
        monitor = MonitorServer(
            ServerView(server),
            MonitorConfig("127.0.0.1", 0),
            version=VERSION,
            go_version=GO_VERSION,
            log=log,
        )
        await monitor.start()
        view = ServerView(server)
        totals = view.totals()
        results["server_totals"] = {
            "channels": totals.channels,
            "subscriptions": totals.subscriptions,
        }

        snapshot = await metrics.collect(view, version=VERSION, go_version=GO_VERSION)

        # As the /metrics handler does: no garbage collection during a scrape (pacing.py).
        async def collect() -> int:
            with gc_paused():
                snap = await metrics.collect(view, version=VERSION, go_version=GO_VERSION)
                await release(snap.channels)
            return 0

        async def render() -> int:
            with gc_paused():
                return sum(map(len, metrics.render(snapshot)))

        async def render_gzip() -> int:
            with gc_paused():
                return sum(map(len, metrics.render_gzip(snapshot)))

        await timed("collect_on_loop", results, args.repeat, collect)
        await timed("render_text", results, args.repeat, render)
        await timed("render_gzip", results, args.repeat, render_gzip)
        port = monitor.port

        def get(path: str, gzip: bool) -> Callable[[], Awaitable[int]]:
            # A blocking client in a thread: the loop-stall figure is the server's alone.
            def fetch() -> int:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                try:
                    conn.request(
                        "GET", path, headers={"Accept-Encoding": "gzip" if gzip else "identity"}
                    )
                    resp = conn.getresponse()
                    assert resp.status == 200, resp.status
                    return len(resp.read())
                finally:
                    conn.close()

            return lambda: asyncio.to_thread(fetch)

        await timed("http_metrics_gzip", results, args.repeat, get("/metrics", True))
        await timed("http_metrics_plain", results, args.repeat, get("/metrics", False))
        await timed("http_serverz", results, args.repeat, get("/streaming/serverz", False))
        all_channels = f"/streaming/channelsz?subs=1&limit={args.channels + 1}"
        await timed("http_channelsz_all_subs", results, 1, get(all_channels, False))
        await timed("http_clientsz_all_subs", results, 1, get("/streaming/clientsz?subs=1", False))
        samples = sum(len(subs) for _, subs in snapshot.channels)
        results["samples_per_scrape"] = (
            len(metrics.SERVER_FAMILIES)
            + 2
            + len(metrics.CHANNEL_FAMILIES) * len(snapshot.channels)
            + len(metrics.SUBSCRIPTION_FAMILIES) * samples
        )
        if args.compare_prometheus_client:
            results["prometheus_client_generate_latest_3_families_seconds"] = round(
                prometheus_client_seconds(snapshot), 1
            )
        results["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        await monitor.stop()
    finally:
        await client.close()
        await server.stop()
        await nats.stop()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, default=10_000)
    parser.add_argument("--subs", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare-prometheus-client", action="store_true")
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
