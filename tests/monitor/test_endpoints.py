"""``/streaming/*`` of a real ``stanpkg run`` process after the scripted scenario
(tests/monitor/scenario.py), field by field against spec/monitoring.md."""

from __future__ import annotations

import json
import re
import resource
from datetime import datetime, timedelta
from typing import Any

import pytest

from stanpkg.monitor.gojson import go_json
from stanpkg.node import GO_VERSION, VERSION
from tests.monitor.conftest import Reply, ScenarioRun
from tests.monitor.scenario import AUDIT, EMPTY, ORDERS

GO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?(Z|[+-]\d\d:\d\d)$")
SERVERZ_KEYS = [
    "cluster_id",
    "server_id",
    "version",
    "go",
    "state",
    "now",
    "start_time",
    "uptime",
    "clients",
    "subscriptions",
    "channels",
    "total_msgs",
    "total_bytes",
    "in_msgs",
    "in_bytes",
    "out_msgs",
    "out_bytes",
    "open_fds",
    "max_fds",
]
SUBZ_KEYS = [
    "client_id",
    "inbox",
    "ack_inbox",
    "durable_name",
    "queue_name",
    "is_durable",
    "is_offline",
    "max_inflight",
    "ack_wait",
    "last_sent",
    "pending_count",
    "is_stalled",
]


def json_of(reply: Reply) -> Any:
    """The body, checked to be Go's MarshalIndent output served as application/json."""
    assert reply.status == 200, reply.text
    assert reply.headers["content-type"] == "application/json"
    assert not reply.text.endswith("\n")
    doc = json.loads(reply.text)
    assert reply.text == go_json(doc)  # 2-space indent, '": "', order as served
    return doc


def parse_go_time(text: str) -> datetime:
    match = GO_TIME.match(text)
    assert match, text
    base, fraction, zone = text[:19], (match.group(1) or ".")[1:], match.group(2)
    micro = fraction.ljust(6, "0")[:6]
    return datetime.fromisoformat(f"{base}.{micro}{'+00:00' if zone == 'Z' else zone}")


def check_now(text: str) -> None:
    now = datetime.now().astimezone()
    assert abs(parse_go_time(text) - now) < timedelta(seconds=10), text


def channel_bytes(run: ScenarioRun, channel: str) -> int:
    return sum(run.expected.stored_sizes.get(channel, {}).values())


# -- serverz / storez -------------------------------------------------------------------


def test_log_names_the_streaming_monitor(scenario: ScenarioRun) -> None:
    lines = scenario.proc.lines
    monitor = [i for i, line in enumerate(lines) if "monitor on" in line]
    assert len(monitor) == 1, lines  # nats-server's private monitor is not announced
    assert lines[monitor[0]].endswith(
        f"[INF] Starting http monitor on 127.0.0.1:{scenario.proc.monitor_port}"
    )
    listening = next(i for i, line in enumerate(lines) if "Listening for client" in line)
    assert monitor[0] < listening  # where the reference prints it


def test_serverz(scenario: ScenarioRun) -> None:
    exp = scenario.expected
    doc = json_of(scenario.proc.get("/streaming/serverz"))
    assert list(doc) == SERVERZ_KEYS
    assert doc["cluster_id"] == scenario.proc.cluster_id
    assert doc["server_id"] == scenario.proc.server_id
    assert doc["version"] == VERSION
    assert doc["go"] == GO_VERSION
    assert doc["state"] == "STANDALONE"
    check_now(doc["now"])
    assert parse_go_time(doc["start_time"]) <= parse_go_time(doc["now"])
    assert re.fullmatch(r"(\d+m)?\d+s", doc["uptime"]), doc["uptime"]
    assert doc["clients"] == 3
    assert doc["subscriptions"] == 7  # offline durables and the queue shadow included
    assert doc["channels"] == 3
    assert doc["total_msgs"] == 5
    assert doc["total_bytes"] == channel_bytes(scenario, ORDERS) + channel_bytes(scenario, AUDIT)
    assert (doc["in_msgs"], doc["in_bytes"]) == (exp.in_msgs, exp.in_bytes)
    assert (doc["out_msgs"], doc["out_bytes"]) == (exp.out_msgs, exp.out_bytes)
    assert doc["open_fds"] > 5
    assert doc["max_fds"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_storez(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/streaming/storez")
    doc = json_of(reply)
    assert list(doc) == [
        "cluster_id",
        "server_id",
        "now",
        "type",
        "limits",
        "total_msgs",
        "total_bytes",
    ]
    assert (doc["cluster_id"], doc["server_id"]) == (
        scenario.proc.cluster_id,
        scenario.proc.server_id,
    )
    check_now(doc["now"])
    assert doc["type"] == "MEMORY"
    hour, age = 3_600_000_000_000, 5_400_000_000_000
    assert doc["limits"] == {
        "max_channels": 20,
        "max_msgs": 50,
        "max_bytes": 1048576,
        "max_age": age,
        "max_subscriptions": 10,
        "max_inactivity": 0,
        "channels": {
            "audit.>": {
                "max_msgs": 50,
                "max_bytes": 10240,
                "max_age": age,
                "max_subscriptions": 10,
                "max_inactivity": hour,
            },
            "audit.trail": {  # inherits from audit.>
                "max_msgs": 50,
                "max_bytes": 10240,
                "max_age": age,
                "max_subscriptions": 6,
                "max_inactivity": hour,
            },
            "orders.*": {
                "max_msgs": 3,
                "max_bytes": 1048576,
                "max_age": age,
                "max_subscriptions": 10,
                "max_inactivity": 0,
            },
        },
    }
    assert list(doc["limits"]) == [
        "max_channels",
        "max_msgs",
        "max_bytes",
        "max_age",
        "max_subscriptions",
        "max_inactivity",
        "channels",
    ]
    assert list(doc["limits"]["channels"]["orders.*"]) == [
        "max_msgs",
        "max_bytes",
        "max_age",
        "max_subscriptions",
        "max_inactivity",
    ]
    assert '"audit.\\u003e": {' in reply.text  # Go's HTML-safe escaping of map keys
    assert doc["total_msgs"] == 5
    assert doc["total_bytes"] == channel_bytes(scenario, ORDERS) + channel_bytes(scenario, AUDIT)


# -- clientsz ---------------------------------------------------------------------------


def expected_clientz(scenario: ScenarioRun, client_id: str, with_subs: bool) -> dict[str, Any]:
    exp = scenario.expected
    names = {"alpha": [], "beta": ["A", "B", "C"], "gamma": ["q1"]}[client_id]
    doc: dict[str, Any] = {
        "id": client_id,
        "hb_inbox": exp.clients[client_id].hb_inbox,
        "subs_count": len(names),
    }
    if with_subs and names:
        by_channel: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            by_channel.setdefault(exp.sub_channel[name], []).append(exp.subs[name])
        doc["subscriptions"] = {key: by_channel[key] for key in sorted(by_channel)}
    return doc


@pytest.mark.parametrize("subs", ["", "&subs=1"])
def test_clientsz_list(scenario: ScenarioRun, subs: str) -> None:
    doc = json_of(scenario.proc.get(f"/streaming/clientsz?x=1{subs}"))
    assert list(doc) == [
        "cluster_id",
        "server_id",
        "now",
        "offset",
        "limit",
        "count",
        "total",
        "clients",
    ]
    assert (doc["cluster_id"], doc["server_id"]) == (
        scenario.proc.cluster_id,
        scenario.proc.server_id,
    )
    check_now(doc["now"])
    assert (doc["offset"], doc["limit"], doc["count"], doc["total"]) == (0, 1024, 3, 3)
    with_subs = bool(subs)
    assert doc["clients"] == [
        expected_clientz(scenario, c, with_subs) for c in ("alpha", "beta", "gamma")
    ]
    beta = doc["clients"][1]
    assert list(beta)[:3] == ["id", "hb_inbox", "subs_count"]
    if with_subs:
        assert list(beta["subscriptions"]) == [AUDIT, ORDERS]  # Go sorts map keys
        for sub in beta["subscriptions"][ORDERS]:
            assert list(sub) == [k for k in SUBZ_KEYS if k in sub]


@pytest.mark.parametrize("client_id", ["alpha", "beta", "gamma"])
@pytest.mark.parametrize("subs", ["", "1", "true", "01"])
def test_clientz_single(scenario: ScenarioRun, client_id: str, subs: str) -> None:
    doc = json_of(scenario.proc.get(f"/streaming/clientsz?client={client_id}&subs={subs}"))
    with_subs = subs in ("1", "01")  # strconv.Atoi(subs) == 1
    assert doc == expected_clientz(scenario, client_id, with_subs)


def test_clientz_unknown_is_404(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/streaming/clientsz?client=nobody&subs=1&callback=cb")
    assert reply.status == 404
    assert reply.text == "Client nobody not found\n"
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.headers["x-content-type-options"] == "nosniff"


# -- channelsz --------------------------------------------------------------------------


def expected_channelz(scenario: ScenarioRun, name: str, with_subs: bool) -> dict[str, Any]:
    exp = scenario.expected
    subs = {AUDIT: ["B", "dur", "redo", "q1"], ORDERS: ["A", "C", "dq"], EMPTY: []}[name]
    first, last, msgs = {AUDIT: (1, 2, 2), ORDERS: (3, 5, 3), EMPTY: (0, 0, 0)}[name]
    doc: dict[str, Any] = {
        "name": name,
        "msgs": msgs,
        "bytes": channel_bytes(scenario, name),
        "first_seq": first,
        "last_seq": last,
        "subs_count": len(subs),
    }
    if with_subs and subs:
        doc["subscriptions"] = exp.subscriptionz(*subs)
    return doc


# monitoring.md §5.2: the keys of a channelsz list document, before names or channels.
CHANNELSZ_LIST_KEYS = ["cluster_id", "server_id", "now", "offset", "limit", "count", "total"]


def test_channelsz_names(scenario: ScenarioRun) -> None:
    doc = json_of(scenario.proc.get("/streaming/channelsz"))
    assert list(doc) == [*CHANNELSZ_LIST_KEYS, "names"]
    check_now(doc["now"])
    assert (doc["offset"], doc["limit"], doc["count"], doc["total"]) == (0, 1024, 3, 3)
    assert doc["names"] == [AUDIT, EMPTY, ORDERS]


def test_channelsz_with_subscriptions(scenario: ScenarioRun) -> None:
    doc = json_of(scenario.proc.get("/streaming/channelsz?subs=1"))
    assert list(doc) == [*CHANNELSZ_LIST_KEYS, "channels"]
    assert (doc["count"], doc["total"]) == (3, 3)
    assert doc["channels"] == [
        expected_channelz(scenario, name, True) for name in (AUDIT, EMPTY, ORDERS)
    ]
    orders = doc["channels"][2]
    assert list(orders) == [
        "name",
        "msgs",
        "bytes",
        "first_seq",
        "last_seq",
        "subs_count",
        "subscriptions",
    ]
    shadow = orders["subscriptions"][2]
    assert list(shadow) == [k for k in SUBZ_KEYS if k != "durable_name"]
    assert shadow["client_id"] == "alpha"  # the last member, while the server runs


@pytest.mark.parametrize("name", [AUDIT, ORDERS, EMPTY])
@pytest.mark.parametrize("subs", [False, True])
def test_channelz_single(scenario: ScenarioRun, name: str, subs: bool) -> None:
    query = f"/streaming/channelsz?channel={name}" + ("&subs=1" if subs else "")
    assert json_of(scenario.proc.get(query)) == expected_channelz(scenario, name, subs)


def test_channelz_unknown_is_404(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/streaming/channelsz?channel=no.such&callback=cb")
    assert (reply.status, reply.text) == (404, "Channel no.such not found\n")
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.headers["x-content-type-options"] == "nosniff"


# -- JSONP, other paths -----------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/streaming/serverz",
        "/streaming/storez",
        "/streaming/clientsz",
        "/streaming/clientsz?client=beta&subs=1",
        "/streaming/channelsz",
        "/streaming/channelsz?subs=1",
        "/streaming/channelsz?channel=orders.new",
    ],
)
def test_jsonp(scenario: ScenarioRun, path: str) -> None:
    sep = "&" if "?" in path else "?"
    reply = scenario.proc.get(f"{path}{sep}callback=my.cb_1")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/javascript"
    assert reply.text.startswith("my.cb_1({\n") and reply.text.endswith("})")
    doc = json.loads(reply.text[len("my.cb_1(") : -1])
    assert reply.text[len("my.cb_1(") : -1] == go_json(doc)
    empty = scenario.proc.get(f"{path}{sep}callback=")  # empty callback: plain JSON
    assert empty.headers["content-type"] == "application/json"


def test_is_ft_active_is_204_when_standalone(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/streaming/isFTActive")
    assert (reply.status, reply.body) == (204, b"")


def test_root_page_links_the_endpoints(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/streaming")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    for path in ("serverz", "storez", "clientsz", "channelsz"):
        assert f"href=./streaming/{path}>" in reply.text


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_any_method_is_served(scenario: ScenarioRun, method: str) -> None:
    doc = json_of(scenario.proc.get("/streaming/channelsz", method=method))
    assert doc["total"] == 3


def test_head_has_no_body(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/streaming/serverz", method="HEAD")
    assert (reply.status, reply.body) == (200, b"")


def test_no_server_header(scenario: ScenarioRun) -> None:
    assert "server" not in scenario.proc.get("/streaming/serverz").headers


# -- the embedded nats-server's endpoints -----------------------------------------------


@pytest.mark.parametrize("path", ["/varz", "/connz", "/routez", "/subsz", "/healthz"])
def test_nats_endpoints_are_proxied(scenario: ScenarioRun, path: str) -> None:
    reply = scenario.proc.get(path)
    assert reply.status == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    doc = json.loads(reply.text)
    assert isinstance(doc, dict)


def test_proxied_connz_lists_the_streaming_connections(scenario: ScenarioRun) -> None:
    doc = json.loads(scenario.proc.get("/connz?subs=1&limit=100").text)
    names = {conn.get("name") for conn in doc["connections"]}
    cid = scenario.proc.cluster_id
    assert {f"_NSS-{cid}-general", f"_NSS-{cid}-acks"} <= names
    varz = json.loads(scenario.proc.get("/varz").text)
    assert varz["connections"] >= 5  # ours, and the three clients'


def test_proxied_query_string_reaches_nats(scenario: ScenarioRun) -> None:
    doc = json.loads(scenario.proc.get("/connz?limit=1&offset=1&sort=cid").text)
    assert (doc["limit"], doc["offset"], len(doc["connections"])) == (1, 1, 1)
    assert doc["total"] >= 5


@pytest.mark.parametrize("path", ["/nothing/here", "/streaming/serverz/", "/streaming/Serverz"])
def test_unknown_paths_fall_through_to_nats(scenario: ScenarioRun, path: str) -> None:
    reply = scenario.proc.get(path)
    assert reply.status == 404
    assert "404" in reply.text


def test_nats_root_page(scenario: ScenarioRun) -> None:
    reply = scenario.proc.get("/")
    assert reply.status == 200 and "varz" in reply.text
