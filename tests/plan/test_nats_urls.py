"""The NATS cluster URLs of --cluster and --routes: a bad port is a diagnostic naming the
flag, never a traceback of ``stanpkg validate`` (which renders the embedded server's
configuration from them), and the URL is shown without its password."""

from __future__ import annotations

import pytest

from stanpkg.cli import main


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--cluster", "nats://u:s3cr3t@127.0.0.1:-1"],
            '--cluster: error: cluster_listen: "nats://u:<redacted>@127.0.0.1:-1" has no valid '
            "port (a number 0-65535)",
        ),
        (
            ["--cluster", "nats://127.0.0.1:6222", "--routes", "nats://a:6222,nats://t0k@b:x"],
            '--routes: error: routes: "nats://<redacted>@b:x" has no valid port (a number 0-65535)',
        ),
        (
            ["--cluster", "nats://127.0.0.1:99999"],
            '--cluster: error: cluster_listen: "nats://127.0.0.1:99999" has no valid port '
            "(a number 0-65535)",
        ),
    ],
)
def test_a_bad_port(flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *flags]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [expected, "invalid: 1 error"]
    assert "s3cr3t" not in "".join(err) and "t0k" not in "".join(err)


def test_good_urls_pass(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--cluster", "nats://u:p@127.0.0.1:6222", "--routes", "nats://127.0.0.1:6223"]
    assert main(["validate", *flags]) == 0
