"""Secrets never leak: marker secrets planted everywhere a secret can be (encryption key
in the file, a flag and the environment; the streaming server's NATS password and token;
the embedded NATS server's user password and token; credentials in the NATS URL, the
cluster URL and the routes; the SQL DSN's password; passwords in passed-through NATS
blocks), then every output is searched for them: ``stanpkg validate`` (text, JSON,
``--explain``), ``stanpkg plan``, ``stanpkg limits``, the error messages of configurations
that give those secrets a wrong value, a server's log from start to shutdown, every
monitoring endpoint and ``/metrics``, and the log of a server that fails to start.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from stanpkg.cli import main
from stanpkg.plan.redact import redact_urls
from tests.log_lines import LineReadingProcess
from tests.monitor.conftest import http_request

# Marker secrets: long and distinct, so a hit can only be a leak.
ENC_FILE, ENC_FLAG, ENC_ENV = "ENCFILE7f3a9c", "ENCFLAG7f3a9c", "ENCENV7f3a9c"
STAN_PASS, STAN_TOKEN = "STANPASS7f3a9c", "STANTOKEN7f3a9c"
NATS_PASS, NATS_TOKEN = "NATSPASS7f3a9c", "NATSTOKEN7f3a9c"
CLUSTER_PASS, ROUTE_PASS, URL_PASS = "CLUSTERPASS7f3a9c", "ROUTEPASS7f3a9c", "URLPASS7f3a9c"
SQL_PASS, BLOCK_PASS = "SQLPASS7f3a9c", "BLOCKPASS7f3a9c"
ALL = (
    ENC_FILE,
    ENC_FLAG,
    ENC_ENV,
    STAN_PASS,
    STAN_TOKEN,
    NATS_PASS,
    NATS_TOKEN,
    CLUSTER_PASS,
    ROUTE_PASS,
    URL_PASS,
    SQL_PASS,
    BLOCK_PASS,
)
NUMBER = "739117"  # numeric secrets (a wrong type for every secret option) start so
LEAK = re.compile("|".join(re.escape(m) for m in (*ALL, "7f3a9c", NUMBER)))

ENV = {"NATS_STREAMING_ENCRYPTION_KEY": ENC_ENV}

STAN_CONF = f"""
streaming {{
  cluster_id: "secrets"
  store: file
  dir: "datastore"
  sql: {{ driver: mysql, source: "stanpkg:{SQL_PASS}@tcp(127.0.0.1:1)/stanpkg_test" }}
  username: "stan"
  password: "{STAN_PASS}"
  token: "{STAN_TOKEN}"
  encryption_key: "{ENC_FILE}"
}}
leafnodes {{
  remotes: [ {{ url: "nats-leaf://leaf:{BLOCK_PASS}@127.0.0.1:1" }} ]
}}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLUSTER_PORT = _free_port()
FLAGS = [
    "--user",
    "natsuser",
    "--pass",
    NATS_PASS,
    "--cluster",
    f"nats://cu:{CLUSTER_PASS}@127.0.0.1:{CLUSTER_PORT}",
    "--routes",
    f"nats://ru:{ROUTE_PASS}@127.0.0.1:1",
    "-encryption_key",
    ENC_FLAG,
]


def _leaks(text: str) -> list[str]:
    return sorted({m.group() for m in LEAK.finditer(text)})


def _run_cli(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    main(argv)
    out = capsys.readouterr()
    return out.out + out.err


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "stan.conf"
    path.write_text(STAN_CONF, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["validate"],
        ["validate", "--explain"],
        ["validate", "--format", "json"],
        ["validate", "--strict", "--explain"],
        ["validate", "--format", "sarif"],
        ["validate", "--format", "github"],
        ["validate", "--format", "gitlab"],
        ["plan"],
        ["limits"],
    ],
    ids=" ".join,
)
def test_offline_commands(
    command: list[str],
    conf: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = _run_cli([*command, "-c", str(conf), *FLAGS], capsys, monkeypatch)
    assert "<redacted>" in output or command[0] == "limits" or "--explain" not in command
    assert _leaks(output) == []
    if command == ["plan"]:
        plan = json.loads(output)
        listen = f"nats://cu:<redacted>@127.0.0.1:{CLUSTER_PORT}"
        assert plan["nats_server"]["cluster_listen"] == listen
        assert plan["nats_server"]["routes"] == ["nats://ru:<redacted>@127.0.0.1:1"]
        assert plan["encryption_key"] == plan["password"] == plan["token"] == "<redacted>"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_diff_compares_secrets_without_showing_them(
    fmt: str, conf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = conf.with_name("other.conf")
    other.write_text(
        STAN_CONF.replace("7f3a9c", "7f3a9cZ").replace("127.0.0.1:1", "127.0.0.1:2"),
        encoding="utf-8",
    )
    argv = ["diff", "--format", fmt, str(conf), str(other), "-ns", f"nats://u:{URL_PASS}@h:4222"]
    output = _run_cli(argv, capsys, monkeypatch)
    # (the encryption key comes from the environment for both: no change there)
    for changed in ("password", "token", "sql_options.source"):
        assert f'"{changed}"' in output if fmt == "json" else f"{changed}: " in output
    assert _leaks(output) == []


def test_an_external_nats_url_with_credentials(
    conf: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in (f"nats://u:{URL_PASS}@127.0.0.1:4222", f"nats://{URL_PASS}@127.0.0.1:4222"):
        for command in (["plan"], ["validate", "--explain"]):
            output = _run_cli([*command, "-sc", str(conf), "-ns", url], capsys, monkeypatch)
            assert _leaks(output) == [], command


# Wrong values for secrets: the messages say what is wrong, never the value.
BAD_SECRETS = [
    f"password: {NUMBER}0",
    f"token: {NUMBER}1",
    f"encryption_key: {NUMBER}2",
    f"encryption_key: {NUMBER}2.5",
    f"sql {{ driver: mysql, source: {NUMBER}3 }}",
    f'sql {{ driver: mysql, source: "u:{SQL_PASS}@tcp(127.0.0.1:3306/x" }}',
    f'sql {{ driver: mysql, source: "u:{SQL_PASS}@bogus(127.0.0.1)/x" }}',
    f"password: {NUMBER}0\npassword: true",
    f"password: {{ a: {NUMBER} }}",
    f"password: [{NUMBER}]",
]


@pytest.mark.parametrize("entry", BAD_SECRETS)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_errors_about_secrets(
    entry: str,
    fmt: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "bad.conf"
    path.write_text(f"store: sql\n{entry}\n", encoding="utf-8")
    output = _run_cli(["validate", "--format", fmt, str(path)], capsys, monkeypatch)
    assert "error" in output
    assert _leaks(output) == []


_RUN = "import sys; from stanpkg.cli import main; sys.exit(main())"


def test_nats_server_complaints_quoting_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """nats-server -t quotes a bad route or leafnode URL whole: shown without its password."""
    (tmp_path / "stan.conf").write_text("", encoding="utf-8")
    nats = tmp_path / "nats.conf"
    nats.write_text(
        f'leafnodes {{ remotes: [ {{ url: "nats-leaf://u:{BLOCK_PASS}@127.0.0.1:x" }} ] }}\n'
        f'cluster {{ routes: ["nats://r:{ROUTE_PASS}@127.0.0.1:y"] }}\n',
        encoding="utf-8",
    )
    for fmt in ("text", "json"):
        argv = ["validate", "--format", fmt, "-sc", str(tmp_path / "stan.conf"), "-c", str(nats)]
        output = _run_cli(argv, capsys, monkeypatch)
        assert "nats://r:<redacted>@127.0.0.1:y" in output
        assert _leaks(output) == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("nats://u:p@h:4222", "nats://u:<redacted>@h:4222"),
        ("nats://tok@h", "nats://<redacted>@h"),
        ("a nats://u:p@h, tls://v:q@k:1 b", "a nats://u:<redacted>@h, tls://v:<redacted>@k:1 b"),
        ("nats://h:4222", "nats://h:4222"),
        ("user@example.com", "user@example.com"),
        ('"nats://u:p:q@h"', '"nats://u:<redacted>@h"'),
    ],
)
def test_redact_urls(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


class _Server(LineReadingProcess):
    """A ``stanpkg run`` process with the marker flags and environment."""

    def __init__(self, cwd: Path, argv: list[str]) -> None:
        runner = [sys.executable, "-c", _RUN, "run", *argv]
        super().__init__(runner, cwd=cwd, env={**os.environ, **ENV})


MONITOR_PATHS = [
    "/",
    "/streaming/serverz",
    "/streaming/storez",
    "/streaming/clientsz?subs=1",
    "/streaming/channelsz?subs=1",
    "/streaming/isFTActive",
    "/metrics",
    "/varz",
    "/connz?auth=1",
    "/routez",
    "/subsz",
    "/leafz",
    "/accountz",
    "/healthz",
    "/jsz",
]


@pytest.mark.slow
def test_a_running_server_its_log_and_monitoring(conf: Path) -> None:
    argv = ["-sc", str(conf), "-c", str(conf), "-a", "127.0.0.1", "-p", "-1", "-m", "-1", "-SDV"]
    server = _Server(conf.parent, [*argv, *FLAGS])
    try:
        port = int(server.wait_for(r"Starting http monitor on \S+:(\d+)$").group(1))
        server.wait_for(r"STREAM: Streaming Server is ready")
        bodies = {path: http_request(port, path) for path in MONITOR_PATHS}
    finally:
        server.stop(timeout=20)
        log = server.log
    assert server.proc.returncode == 0, log
    assert bodies["/streaming/serverz"].status == 200
    assert "Streaming Server is ready" in log
    for path, reply in bodies.items():
        assert _leaks(reply.body.decode(errors="replace")) == [], path
    assert _leaks(log) == [], log


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["-ns", f"nats://u:{URL_PASS}@127.0.0.1:1"],
        ["-ns", f"nats://{URL_PASS}@127.0.0.1:1"],
        ["-st", "sql", "-p", "-1", "-a", "127.0.0.1"],
    ],
    ids=["url-password", "url-token", "sql-dsn"],
)
def test_a_server_that_cannot_start(argv: list[str], conf: Path) -> None:
    """Its errors (NATS unreachable, SQL database unreachable) name where, not how."""
    server = _Server(conf.parent, ["-sc", str(conf), *argv])
    try:
        server.proc.wait(60)
    finally:
        server.stop(timeout=20)
        log = server.log
    assert server.proc.returncode != 0, log
    assert _leaks(log) == [], log
