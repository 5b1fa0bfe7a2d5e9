"""The NATS cluster URLs of --cluster and --routes: a bad port (or URL) is a diagnostic naming the
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
            '--cluster: error: cluster_listen: "nats://u:<redacted>@127.0.0.1:-1" is not a valid '
            "URL: its port must be a number from 0 to 65535",
        ),
        (
            ["--cluster", "nats://127.0.0.1:6222", "--routes", "nats://a:6222,nats://t0k@b:x"],
            '--routes: error: routes: "nats://<redacted>@b:x" is not a valid URL: its port must '
            "be a number from 0 to 65535",
        ),
        (
            ["--cluster", "nats://127.0.0.1:99999"],
            '--cluster: error: cluster_listen: "nats://127.0.0.1:99999" is not a valid URL: its '
            "port must be a number from 0 to 65535",
        ),
        (
            ["--cluster", "nats://u:s3cr3t@[::1"],
            '--cluster: error: cluster_listen: "nats://u:<redacted>@[::1" is not a valid URL: '
            "Invalid IPv6 URL",
        ),
    ],
)
def test_a_bad_url(flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *flags]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [expected, "invalid: 1 error"]
    assert "s3cr3t" not in "".join(err) and "t0k" not in "".join(err)


def test_good_urls_pass(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--cluster", "nats://u:p@127.0.0.1:6222", "--routes", "nats://127.0.0.1:6223"]
    assert main(["validate", *flags]) == 0
