"""``/metrics`` of the scenario process, parsed with prometheus_client's parser: the
prometheus-nats-exporter's names, types and labels, and the stanpkg extras."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.monitor.conftest import ScenarioRun
from tests.monitor.scenario import AUDIT, EMPTY, ORDERS

# The exporter's families (collector/streaming.go) and their types.
EXPORTER_TYPES = {
    "nss_server_bytes_total": "counter",
    "nss_server_msgs_total": "counter",
    "nss_server_bytes_in": "counter",
    "nss_server_bytes_out": "counter",
    "nss_server_msgs_in": "counter",
    "nss_server_msgs_out": "counter",
    "nss_server_channels": "counter",
    "nss_server_subscriptions": "counter",
    "nss_server_clients": "counter",
    "nss_server_active": "gauge",
    "nss_server_info": "gauge",
    "nss_chan_bytes_total": "gauge",
    "nss_chan_msgs_total": "gauge",
    "nss_chan_last_seq": "gauge",
    "nss_chan_subs_last_sent": "gauge",
    "nss_chan_subs_pending_count": "gauge",
    "nss_chan_subs_max_inflight": "gauge",
}
CHANNEL_LABELS = {"server_id", "server_role", "channel"}
SUB_LABELS = CHANNEL_LABELS | {
    "client_id",
    "inbox",
    "queue_name",
    "is_durable",
    "is_offline",
    "durable_name",
}


@pytest.fixture(scope="module")
def exposition(scenario: ScenarioRun) -> str:
    reply = scenario.proc.get("/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return reply.text


@pytest.fixture(scope="module")
def samples(exposition: str) -> dict[str, list[Sample]]:
    """Samples by their name as written (the parser appends ``_total`` to counter
    samples internally; undone here)."""
    found: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            name = sample.name
            if family.type == "counter" and not _written(exposition, name):
                name = name.removesuffix("_total")
            found.setdefault(name, []).append(sample)
    return found


def _written(exposition: str, name: str) -> bool:
    return f"\n{name}{{" in exposition


def one(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    matching = [s for s in samples[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matching) == 1, (name, labels, samples.get(name))
    return matching[0].value


def test_exporter_families_types_and_names(exposition: str) -> None:
    for name, kind in EXPORTER_TYPES.items():
        assert f"\n# TYPE {name} {kind}\n" in "\n" + exposition, name
    # Written without prometheus_client's ``_total`` suffixing of counters.
    assert "\nnss_server_msgs_in{" in exposition
    assert "nss_server_msgs_in_total" not in exposition


def test_server_metrics_match_serverz(
    scenario: ScenarioRun, samples: dict[str, list[Sample]]
) -> None:
    serverz = json.loads(scenario.proc.get("/streaming/serverz").text)
    server_id = scenario.proc.server_id
    pairs = {
        "nss_server_bytes_total": "total_bytes",
        "nss_server_msgs_total": "total_msgs",
        "nss_server_bytes_in": "in_bytes",
        "nss_server_bytes_out": "out_bytes",
        "nss_server_msgs_in": "in_msgs",
        "nss_server_msgs_out": "out_msgs",
        "nss_server_channels": "channels",
        "nss_server_subscriptions": "subscriptions",
        "nss_server_clients": "clients",
    }
    for metric, key in pairs.items():
        assert one(samples, metric, server_id=server_id) == serverz[key], metric
        assert set(samples[metric][0].labels) == {"server_id"}
    assert one(samples, "nss_server_active", server_id=server_id) == 1
    assert one(samples, "nss_server_msgs_redelivered", server_id=server_id) == (
        scenario.expected.redelivered
    )
    (info,) = samples["nss_server_info"]
    assert info.value == 1
    assert info.labels == {
        "server_id": server_id,
        "cluster_id": scenario.proc.cluster_id,
        "version": serverz["version"],
        "go_version": serverz["go"],
        "state": "STANDALONE",
        "role": "",
        "start_time": serverz["start_time"],
    }


def test_channel_metrics(scenario: ScenarioRun, samples: dict[str, list[Sample]]) -> None:
    channelsz = json.loads(scenario.proc.get("/streaming/channelsz?subs=1").text)
    for channel in channelsz["channels"]:
        labels = {"channel": channel["name"], "server_id": scenario.proc.server_id}
        assert one(samples, "nss_chan_bytes_total", **labels) == channel["bytes"]
        assert one(samples, "nss_chan_msgs_total", **labels) == channel["msgs"]
        assert one(samples, "nss_chan_last_seq", **labels) == channel["last_seq"]
        assert one(samples, "nss_chan_first_seq", **labels) == channel["first_seq"]
        assert one(samples, "nss_chan_subscriptions", **labels) == channel["subs_count"]
    for name in ("nss_chan_bytes_total", "nss_chan_limit_msgs"):
        assert len(samples[name]) == 3
        assert {s.labels["server_role"] for s in samples[name]} == {""}
        assert set(samples[name][0].labels) == CHANNEL_LABELS


def test_channel_limits(samples: dict[str, list[Sample]]) -> None:
    limits = {  # msgs, bytes, age s, subscriptions, inactivity s (config in scenario.py)
        AUDIT: (50, 10240, 5400, 6, 3600),
        ORDERS: (3, 1048576, 5400, 10, 0),
        EMPTY: (50, 1048576, 5400, 10, 0),
    }
    for channel, values in limits.items():
        got = tuple(
            one(samples, f"nss_chan_limit_{kind}", channel=channel)
            for kind in ("msgs", "bytes", "age_seconds", "subscriptions", "inactivity_seconds")
        )
        assert got == values, channel


def _sub_labels(scenario: ScenarioRun, name: str) -> dict[str, str]:
    doc: dict[str, Any] = scenario.expected.subs[name]
    durable, queue = doc.get("durable_name", ""), doc.get("queue_name", "")
    if doc["is_durable"] and queue:  # the exporter splits "<durable>:<group>"
        durable, _, queue = queue.partition(":")
    return {
        "server_id": scenario.proc.server_id,
        "server_role": "",
        "channel": scenario.expected.sub_channel[name],
        "client_id": doc["client_id"],
        "inbox": doc["inbox"],
        "queue_name": queue,
        "is_durable": "true" if doc["is_durable"] else "false",
        "is_offline": "true" if doc["is_offline"] else "false",
        "durable_name": durable,
    }


@pytest.mark.parametrize("name", ["A", "B", "C", "dur", "redo", "q1", "dq"])
def test_subscription_metrics(
    scenario: ScenarioRun, samples: dict[str, list[Sample]], name: str
) -> None:
    labels = _sub_labels(scenario, name)
    doc = scenario.expected.subs[name]
    matching = [s for s in samples["nss_chan_subs_last_sent"] if s.labels["inbox"] == doc["inbox"]]
    assert [s.labels for s in matching] == [labels]
    assert one(samples, "nss_chan_subs_last_sent", **labels) == doc["last_sent"]
    assert one(samples, "nss_chan_subs_pending_count", **labels) == doc["pending_count"]
    assert one(samples, "nss_chan_subs_max_inflight", **labels) == doc["max_inflight"]
    assert one(samples, "nss_chan_subs_is_stalled", **labels) == int(doc["is_stalled"])
    redelivered = one(samples, "nss_chan_subs_redelivered_pending", **labels)
    assert redelivered == (2 if name == "redo" else 0)


def test_durable_queue_labels_are_split(
    scenario: ScenarioRun, samples: dict[str, list[Sample]]
) -> None:
    shadow = _sub_labels(scenario, "dq")
    assert (shadow["durable_name"], shadow["queue_name"], shadow["client_id"]) == (
        "dq",
        "workers",
        "alpha",
    )
    assert len(samples["nss_chan_subs_pending_count"]) == 7
    assert set(samples["nss_chan_subs_pending_count"][0].labels) == SUB_LABELS


def test_process_metrics_from_prometheus_client(samples: dict[str, list[Sample]]) -> None:
    assert samples["process_open_fds"][0].value > 0
    assert "python_info" in samples


def test_gzip_scrape(scenario: ScenarioRun, exposition: str) -> None:
    reply = scenario.proc.get("/metrics", headers={"Accept-Encoding": "gzip"})
    assert reply.headers["content-encoding"] == "gzip"
    text = gzip.decompress(reply.body).decode()
    streaming = [line for line in text.splitlines() if "nss_chan_subs_" in line]
    assert streaming == [line for line in exposition.splitlines() if "nss_chan_subs_" in line]
    assert list(text_string_to_metric_families(text))
    plain = scenario.proc.get("/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in plain.headers
