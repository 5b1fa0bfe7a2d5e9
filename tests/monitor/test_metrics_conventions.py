"""``/metrics`` beyond the exporter's names: Prometheus' naming conventions, OpenMetrics
when the scraper asks for it, the embedded nats-server's process metrics, and a scraper
that hangs up early."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.monitor.conftest import ScenarioRun, monitor_of
from tests.server.conftest import make_plan, running

OPENMETRICS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"  # what Prometheus sends
)

# conventional name -> the exporter's name for the same number
SAME_NUMBER = {
    "nss_server_in_msgs_total": "nss_server_msgs_in",
    "nss_server_in_bytes_total": "nss_server_bytes_in",
    "nss_server_out_msgs_total": "nss_server_msgs_out",
    "nss_server_out_bytes_total": "nss_server_bytes_out",
    "nss_server_redelivered_msgs_total": "nss_server_msgs_redelivered",
    "nss_server_became_leader_total": "nss_server_leader_promotions",
    "nss_server_stored_msgs": "nss_server_msgs_total",
    "nss_server_stored_bytes": "nss_server_bytes_total",
    "nss_server_current_channels": "nss_server_channels",
    "nss_server_current_subscriptions": "nss_server_subscriptions",
    "nss_server_current_clients": "nss_server_clients",
    "nss_chan_stored_msgs": "nss_chan_msgs_total",
    "nss_chan_stored_bytes": "nss_chan_bytes_total",
}


def _values(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by their name as written, from the 0.0.4 text."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            labels = line[line.find("{") : line.rfind("}") + 1] if "{" in line else ""
            found.setdefault(name, []).append(({"raw": labels}, float(line.rsplit(" ", 1)[1])))
    return found


def _types(text: str) -> dict[str, str]:
    return {
        parts[2]: parts[3]
        for parts in (line.split(" ") for line in text.splitlines())
        if parts[:2] == ["#", "TYPE"]
    }


def test_conventional_names_beside_the_exporters(scenario: ScenarioRun) -> None:
    text = scenario.proc.get("/metrics").text
    values, types = _values(text), _types(text)
    for conventional, exporter in SAME_NUMBER.items():
        assert values[conventional] == values[exporter], conventional
        expected = "counter" if conventional.endswith("_total") else "gauge"
        assert types[conventional] == expected, conventional
    # The exporter's own names stay as dashboards know them.
    assert types["nss_server_msgs_in"] == "counter"
    assert types["nss_chan_msgs_total"] == "gauge"
    # Every counter we define ourselves ends in _total (the exporter's excepted).
    ours = {name for name in types if name.startswith("nss_") and name not in SAME_NUMBER.values()}
    assert all(name.endswith("_total") for name in ours if types[name] == "counter")
    assert list(text_string_to_metric_families(text))


def test_openmetrics_when_asked(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/metrics", headers={"Accept": OPENMETRICS_ACCEPT})
    assert reply.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    text = reply.text
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    families = {family.name: family for family in openmetrics_families(text)}  # strict parser
    assert families["nss_server_in_msgs"].type == "counter"
    assert families["nss_server_in_msgs"].samples[0].name == "nss_server_in_msgs_total"
    # The exporter's families keep their sample names (typed unknown where OpenMetrics
    # would refuse them as counters), so the same queries work in both formats.
    plain = _values(scenario.proc.get("/metrics").text)
    for name in ("nss_server_msgs_in", "nss_server_msgs_total", "nss_chan_msgs_total"):
        assert families[name].type == "unknown"
        assert [s.value for s in families[name].samples] == [v for _, v in plain[name]]
    assert families["nss_chan_last_seq"].type == "gauge"
    assert families["process_cpu_seconds"].type == "counter"
    gzipped = scenario.proc.get(
        "/metrics", headers={"Accept": OPENMETRICS_ACCEPT, "Accept-Encoding": "gzip"}
    )
    assert gzipped.headers["content-encoding"] == "gzip"


def test_embedded_nats_server_memory_and_cpu(scenario: ScenarioRun) -> None:
    values = _values(scenario.proc.get("/metrics").text)
    assert values["nats_server_process_resident_memory_bytes"][0][1] > 1_000_000
    assert values["nats_server_process_cpu_seconds_total"][0][1] >= 0
    assert values["nats_server_process_start_time_seconds"][0][1] > 0
    # Not our own process: nats-server is far smaller than a Python server.
    ours = values["process_resident_memory_bytes"][0][1]
    assert values["nats_server_process_resident_memory_bytes"][0][1] != ours


def _hang_up_during(port: int, path: str) -> None:
    """A client that reads the first bytes of the answer and resets the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.slow
async def test_scraper_hanging_up_is_no_error(nats_url: str) -> None:
    plan = make_plan("-mc", "0")
    async with running(plan, nats_url, debug=True) as (server, log):
        for index in range(20_000):  # ~20 MB of metrics: more than the socket buffers
            server.handlers.channels.lookup_or_create(f"channel.{index}")
        monitor = monitor_of(server)
        await monitor.start()
        try:
            await asyncio.to_thread(_hang_up_during, monitor.port, "/metrics")
            deadline = asyncio.get_running_loop().time() + 30
            while "client left during /metrics" not in log.getvalue():
                assert asyncio.get_running_loop().time() < deadline, log.getvalue()[-2000:]
                await asyncio.sleep(0.05)
        finally:
            await monitor.stop()
    errors = [line for line in log.lines() if "[ERR]" in line]
    assert errors == []
