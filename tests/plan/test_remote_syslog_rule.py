"""``remote_syslog`` is checked by ``validate`` as the server parses it when it dials:
an address it would refuse at start-up is an error at file:line:col, or naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.cli import main
from stanpkg.plan import syslog_address
from stanpkg.server import syslog

BAD = ["ftp://x:1", "bogus", "udp://127.0.0.1", "tcp://:514", "tcp://host:99999", "unix://"]
GOOD = ["udp://localhost:514", "tcp://[::1]:601", "unix:///dev/log", "UDP://10.0.0.1:514"]


def _errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]


@pytest.mark.parametrize("url", BAD)
def test_bad_address_in_a_nats_config_file(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(f'port: 4222\nremote_syslog: "{url}"\n')
    assert main(["validate", "-c", str(conf)]) != 0
    (error,) = _errors(capsys)
    assert error.startswith(f"{conf}:2:16: error: remote_syslog: invalid syslog address")
    assert f'"{url}"' in error


def test_bad_address_in_the_combined_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "stan.conf"
    conf.write_text('streaming {\n  store: memory\n}\nremote_syslog: "ftp://x:1"\n')
    assert main(["validate", str(conf)]) != 0
    (error,) = _errors(capsys)
    assert error.startswith(f"{conf}:4:16: error: remote_syslog:")
    assert "network must be udp, tcp or unix" in error


@pytest.mark.parametrize("flag", ["-r", "--remote_syslog"])
def test_bad_address_as_a_flag_names_the_flag(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", flag, "bogus"]) != 0
    (error,) = _errors(capsys)
    assert error.startswith(f'{flag}: error: remote_syslog: invalid syslog address "bogus"')


@pytest.mark.parametrize("url", GOOD)
def test_good_addresses_pass(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-r", url]) == 0
    assert _errors(capsys) == []


def test_one_parser_for_validate_and_the_server() -> None:
    assert syslog.parse_remote_syslog is syslog_address.parse_remote_syslog
    for url in BAD:
        with pytest.raises(ValueError):
            syslog_address.parse_remote_syslog(url)
