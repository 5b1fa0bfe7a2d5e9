"""``stanpkg validate --against URL NEW`` against real running servers (``stanpkg run``
processes, MEMORY and FILE stores) holding messages and subscriptions published by a real
client: each warning names the channel and the count and stands where NEW sets the limit;
``--strict`` makes them errors (exit 1); an unreachable URL is an error that says so
(exit 2, no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stanpkg.cli import main
from stanpkg.proto import protocol_pb2 as pb
from tests.monitor.conftest import ClientLoop, MonitoredProcess
from tests.review.test_sarif import validated
from tests.server.stan_client import StanClient
from tests.transport.certs import make_certs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

NEW = """\
cluster_id: "{cid}"
{store}
store_limits {
  max_channels: 3
  channels {
    "orders.*": { max_msgs: 8 }
    "audit": { max_subs: 2, max_bytes: 300 }
    "ages.>": { max_age: "2s" }
  }
}
"""


@dataclass
class Live:
    proc: MonitoredProcess
    store: str  # the NEW configuration's store lines for the same store
    tmp: Path
    clients: ClientLoop
    writer: StanClient

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proc.monitor_port}"

    def channels(self) -> dict[str, Any]:
        doc = json.loads(self.proc.get("/streaming/channelsz?subs=1").text)
        return {c["name"]: c for c in doc.get("channels", [])}

    def new_conf(self, name: str = "new.conf", text: str = NEW, **fields: str) -> Path:
        path = self.tmp / name
        values = {"cid": self.proc.cluster_id, "store": self.store, **fields}
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        path.write_text(text)
        return path


async def populate(url: str, cluster_id: str) -> StanClient:
    writer = await StanClient.connect(url, cluster_id, "writer")
    for channel, count, data in (
        ("orders.eu", 10, b"e" * 100),
        ("orders.us", 3, b"u" * 100),
        ("audit", 5, b"a" * 100),
        ("misc", 1, b"m"),
    ):
        for _ in range(count):
            await writer.publish(channel, data)
    for n in range(3):
        await writer.subscribe("audit", durable=f"reader-{n}", start=pb.First)
    return writer


@pytest.fixture(scope="module", params=["memory", "file"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp(f"against-{request.param}")
    if request.param == "file":
        store_args: tuple[str, ...] = ("-st", "file", "--dir", str(tmp / "data"))
        store = f'store: file\ndir: "{tmp / "data"}"'
    else:
        store_args, store = (), "store: memory"
    proc = MonitoredProcess(("-m", "-1", *store_args))
    clients = ClientLoop()
    try:
        proc.wait_for("Streaming Server is ready")
        writer = clients.run(populate(proc.nats_url, proc.cluster_id))
        yield Live(proc, store, tmp, clients, writer)
        clients.run(writer.close())
    finally:
        clients.close()
        assert proc.stop() == 0


def validate_json(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = main(["validate", "--format", "json", *args])
    return status, json.loads(capsys.readouterr().out)


def position(path: Path, needle: str) -> tuple[int, int]:
    """Line and column of the value after ``needle`` in ``path``."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + len(needle) + 1
    raise AssertionError(needle)


def test_what_new_would_remove(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    new = live.new_conf()
    channels = live.channels()
    status, doc = validate_json("--against", live.url, str(new), capsys=capsys)
    assert status == 0 and doc["valid"] is True
    live_findings = [d for d in doc["diagnostics"] if d["code"].startswith("live-")]
    assert all(d["severity"] == "warning" for d in live_findings)
    by_text = {d["message"]: d for d in live_findings}

    eu = 'channel "orders.eu": 2 of its 10 messages would be removed at the next start (max_msgs 8)'
    assert eu in by_text
    line, column = position(new, '"orders.*": { max_msgs: ')
    assert (by_text[eu]["file"], by_text[eu]["line"], by_text[eu]["column"]) == (
        str(new),
        line,
        column,
    )

    audit = channels["audit"]
    excess = audit["bytes"] - 300
    about = -(-excess // round(audit["bytes"] / audit["msgs"]))
    text = (
        f'channel "audit": about {about} of its 5 messages ({audit["bytes"]} bytes, {excess} '
        "over the limit) would be removed at the next start (max_bytes 300)"
    )
    assert text in by_text
    subs = (
        'channel "audit" has 3 subscriptions, 1 over the limit: they are kept, but no new '
        "subscription is accepted until fewer remain (max_subs 2)"
    )
    assert subs in by_text and by_text[subs]["line"] == position(new, "max_subs: ")[0]
    count = len(channels)
    over = (
        f"the server holds {count} channels, {count - 3} over the limit: they are kept, but no "
        "new channel is created until fewer remain (max_channels 3)"
    )
    assert over in by_text
    total = sum(c["msgs"] for c in channels.values())
    memory = (
        f"the running server keeps its {total} messages in memory (MEMORY store): all of them "
        "are lost when it restarts, whatever the configuration"
    )
    assert (memory in by_text) == (live.store == "store: memory")
    assert not any('"orders.us"' in text or '"misc"' in text for text in by_text)
    expected = 4 + (live.store == "store: memory")
    assert len(live_findings) == expected, by_text
    assert doc["against"]["url"] == live.url and doc["against"]["channels"] == count


def test_strict_makes_them_errors(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    new = live.new_conf()
    assert main(["validate", "--strict", "--against", live.url, str(new)]) == 1
    err = capsys.readouterr().err
    line, column = position(new, '"orders.*": { max_msgs: ')
    assert f'{new}:{line}:{column}: error: channel "orders.eu": 2 of its 10 messages' in err
    # nothing to remove: valid even with --strict
    roomy = live.new_conf("roomy.conf", 'cluster_id: "{cid}"\n{store}\n')
    captured = main(["validate", "--strict", "--against", live.url, str(roomy)])
    out = capsys.readouterr()
    assert captured == (1 if live.store == "store: memory" else 0), out.err
    assert out.out.splitlines()[-1].startswith(f"against {live.url}: ")


def test_review_formats_carry_the_findings(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    new = live.new_conf()
    assert main(["validate", "--format", "sarif", "--against", live.url, str(new)]) == 0
    doc = validated(json.loads(capsys.readouterr().out))
    rules = {r["ruleId"] for r in doc["runs"][0]["results"]}
    assert {"live-messages", "live-subscriptions", "live-channels"} <= rules


def test_message_ages_are_counted(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    channel = f"ages.{live.store.split()[1].strip()}"

    async def publish(count: int) -> None:
        for _ in range(count):
            await live.writer.publish(channel, b"t" * 10)

    live.clients.run(publish(4))
    time.sleep(3.5)  # these four are then older than NEW's 2s
    live.clients.run(publish(6))
    new = live.new_conf()
    status, doc = validate_json("--against", live.url, str(new), capsys=capsys)
    assert status == 0
    texts = [d["message"] for d in doc["diagnostics"]]
    expected = (
        f'channel "{channel}": 4 of its 10 messages are older than 2s and would be removed at '
        "the next start (max_age 2s)"
    )
    assert expected in texts, texts
    assert doc["against"]["ages_counted"] is True
    # the probe leaves no subscription behind
    assert live.channels()[channel]["subs_count"] == 0
    # given the NATS URL explicitly, the same
    status, doc = validate_json(
        "--against", live.url, "--against-nats", live.proc.nats_url, str(new), capsys=capsys
    )
    assert any(f'"{channel}": 4 of its 10' in d["message"] for d in doc["diagnostics"])
    # a NATS URL nobody answers: the count is unknown, said so, and the check goes on
    status, out = (
        main(["validate", "--against", live.url, "--against-nats", "nats://127.0.0.1:1", str(new)]),
        capsys.readouterr(),
    )
    assert status == 0
    assert f'channel "{channel}": its messages older than 2s would be removed' in out.err
    assert "cannot connect to NATS at nats://127.0.0.1:1" in out.err


def test_partitioning_and_cluster_id(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    text = NEW.replace("{store}", "{store}\npartitioning: true")
    new = live.new_conf("part.conf", text)
    status, doc = validate_json("--against", live.url, str(new), capsys=capsys)
    assert status == 0
    unserved = {
        d["message"].split('"')[1] for d in doc["diagnostics"] if d["code"] == "live-partitioning"
    }
    assert unserved == {"misc"}  # orders.*, audit and ages.> are listed
    line = position(new, "partitioning: ")[0]
    assert {d["line"] for d in doc["diagnostics"] if d["code"] == "live-partitioning"} == {line}
    other = live.new_conf("other.conf", NEW.replace("{cid}", "someone-else"))
    status, doc = validate_json("--against", live.url, str(other), capsys=capsys)
    assert any(
        f'the running server serves cluster ID "{live.proc.cluster_id}"' in d["message"]
        for d in doc["diagnostics"]
    )


def test_an_invalid_new_configuration_is_not_checked_against(
    live: Live, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = live.new_conf("bad.conf", NEW.replace("max_msgs: 8", "max_msgs: -8"))
    assert main(["validate", "--against", live.url, str(bad)]) == 1
    assert "against" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            "http://127.0.0.1:1",
            "cannot read http://127.0.0.1:1/streaming/serverz: connection refused",
        ),
        ("localhost:8222", "--against needs a monitoring URL such as http://host:8222"),
        ("http://no-such-host.invalid:8222", "unknown host"),
    ],
)
def test_an_unreachable_url_is_an_error_without_traceback(
    url: str, says: str, tmp_path: Path
) -> None:
    conf = tmp_path / "stan.conf"
    conf.write_text("max_msgs: 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "stanpkg.cli", "validate", "--against", url, str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("stanpkg: ") and says in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_port_that_is_not_monitoring(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    new = live.new_conf()
    url = f"http://127.0.0.1:{live.proc.nats_url.rsplit(':', 1)[1]}"
    assert main(["validate", "--against", url, str(new)]) == 2
    assert capsys.readouterr().err.startswith(f"stanpkg: cannot read {url}/streaming/serverz: ")
    assert main(["validate", "--format", "json", "--against", url, str(new)]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] is True and "not an HTTP answer" in doc["against_error"]


def test_https_with_the_ca_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    certs = make_certs(tmp_path)
    tls = ("--tls", "--tlscert", str(certs.server_cert), "--tlskey", str(certs.server_key))
    proc = MonitoredProcess((*tls, "-tls_client_cacert", str(certs.ca), "-ms", "-1"))
    try:
        proc.wait_for("Streaming Server is ready")
        url = f"https://127.0.0.1:{proc.monitor_port}"
        conf = tmp_path / "new.conf"
        conf.write_text(f'cluster_id: "{proc.cluster_id}"\n')
        assert main(["validate", "--against", url, "--against-ca", str(certs.ca), str(conf)]) == 0
        assert capsys.readouterr().out.splitlines()[-1].startswith(f"against {url}: 0 channels")
        # NEW's own CA option (--tlscacert) is the default
        assert main(["validate", "--against", url, "--tlscacert", str(certs.ca), str(conf)]) == 0
        capsys.readouterr()
        assert main(["validate", "--against", url, str(conf)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"stanpkg: cannot read {url}/streaming/serverz: TLS: ")
        assert "CERTIFICATE_VERIFY_FAILED" in err
        assert (
            main(["validate", "--against", url, "--against-ca", str(certs.other_ca), str(conf)])
            == 2
        )
    finally:
        assert proc.stop() == 0
