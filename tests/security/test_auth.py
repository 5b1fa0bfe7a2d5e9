"""User/password and token authorization end to end: a real ``stanpkg run`` whose NATS
server (embedded, then external) requires them; its own connection authenticates, a
client with the wrong secret is refused, and no log line ever shows a secret."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.errors import Error as NatsPyError

from tests.security.conftest import StanpkgRun, node_roundtrip, stan_roundtrip
from tests.server.conftest import start_nats_process

PASSWORD = "pw-MARKER-5f1c9a"  # planted secrets: must never be printed
WRONG_PASSWORD = "pw-WRONG-77d2e0"
TOKEN = "tok-MARKER-0b8e43"
EXPECTED = [b"m0", b"m1", b"m2"]


def assert_no_secret(server: StanpkgRun) -> None:
    for secret in (PASSWORD, WRONG_PASSWORD, TOKEN):
        assert secret not in server.log, f"{secret!r} in the log of {server.argv}"


async def assert_refused(url: str, **options: object) -> None:
    with pytest.raises((NatsPyError, OSError), match=r"(?i)authorization"):
        await stan_roundtrip(url, "any", **options)


def local_url(server: StanpkgRun) -> str:
    return f"nats://127.0.0.1:{server.client_port}"


async def test_embedded_user_password_flags(run_stanpkg: type[StanpkgRun]) -> None:
    server = run_stanpkg("-p", "-1", "--user", "stan", "--pass", PASSWORD)
    server.wait_ready()
    url = local_url(server)
    got = await stan_roundtrip(url, server.cluster_id, user="stan", password=PASSWORD)
    assert got == EXPECTED
    await assert_refused(url, user="stan", password=WRONG_PASSWORD)
    await assert_refused(url)
    assert_no_secret(server)


def test_node_client_password_and_token(run_stanpkg: type[StanpkgRun], node_modules: Path) -> None:
    with_password = run_stanpkg("-p", "-1", "--user", "stan", "--pass", PASSWORD)
    with_token = run_stanpkg("-p", "-1", "--auth", TOKEN)
    with_password.wait_ready()
    with_token.wait_ready()
    url, cluster_id = local_url(with_password), with_password.cluster_id
    expected = {"ok": True, "result": ["m0", "m1", "m2"]}
    assert node_roundtrip(url, cluster_id, user="stan", **{"pass": PASSWORD}) == expected
    wrong = node_roundtrip(url, cluster_id, user="stan", **{"pass": WRONG_PASSWORD})
    assert wrong["ok"] is False and "authorization" in str(wrong["error"]).lower(), wrong
    url, cluster_id = local_url(with_token), with_token.cluster_id
    assert node_roundtrip(url, cluster_id, token=TOKEN) == expected
    wrong = node_roundtrip(url, cluster_id, token=WRONG_PASSWORD)
    assert wrong["ok"] is False and "authorization" in str(wrong["error"]).lower(), wrong
    assert_no_secret(with_password)
    assert_no_secret(with_token)


async def test_embedded_authorization_block(run_stanpkg: type[StanpkgRun], tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(
        f'authorization {{\n  user: stan\n  password: "{PASSWORD}"\n}}\n'
        f'streaming {{\n  username: stan\n  password: "{PASSWORD}"\n}}\n'
    )
    server = run_stanpkg("-p", "-1", "-c", str(conf))
    server.wait_ready()
    url = local_url(server)
    got = await stan_roundtrip(url, server.cluster_id, user="stan", password=PASSWORD)
    assert got == EXPECTED
    await assert_refused(url, user="stan", password=WRONG_PASSWORD)
    assert_no_secret(server)


async def test_embedded_token(run_stanpkg: type[StanpkgRun]) -> None:
    server = run_stanpkg("-p", "-1", "--auth", TOKEN)
    server.wait_ready()
    url = local_url(server)
    assert await stan_roundtrip(url, server.cluster_id, token=TOKEN) == EXPECTED
    await assert_refused(url, token=WRONG_PASSWORD)
    assert_no_secret(server)


@pytest.fixture
def external_nats(tmp_path: Path) -> Iterator[str]:
    block = f'authorization {{\n  user: stan\n  password: "{PASSWORD}"\n}}'
    proc, url = start_nats_process(tmp_path / "nats", block)
    yield url
    proc.kill()
    proc.wait(10)


def streaming_config(tmp_path: Path, password: str) -> str:
    path = tmp_path / "streaming.conf"
    path.write_text(f'username: stan\npassword: "{password}"\n')
    return str(path)


async def test_external_user_password(
    external_nats: str, run_stanpkg: type[StanpkgRun], tmp_path: Path
) -> None:
    server = run_stanpkg("-ns", external_nats, "-sc", streaming_config(tmp_path, PASSWORD))
    server.wait_ready()
    got = await stan_roundtrip(external_nats, server.cluster_id, user="stan", password=PASSWORD)
    assert got == EXPECTED
    await assert_refused(external_nats, user="stan", password=WRONG_PASSWORD)
    assert_no_secret(server)


def test_external_wrong_password_fails_without_showing_it(
    external_nats: str, run_stanpkg: type[StanpkgRun], tmp_path: Path
) -> None:
    wrong = run_stanpkg("-ns", external_nats, "-sc", streaming_config(tmp_path, WRONG_PASSWORD))
    assert wrong.wait_exit() != 0
    assert "[FTL] STREAM: Failed to start: nats: authorization violation" in wrong.log
    assert_no_secret(wrong)


async def test_external_password_in_url_is_not_shown(
    external_nats: str, run_stanpkg: type[StanpkgRun]
) -> None:
    server = run_stanpkg("-ns", external_nats.replace("//", f"//stan:{PASSWORD}@"))
    server.wait_ready()
    got = await stan_roundtrip(external_nats, server.cluster_id, user="stan", password=PASSWORD)
    assert got == EXPECTED
    assert_no_secret(server)
    wrong = run_stanpkg("-ns", external_nats.replace("//", f"//stan:{WRONG_PASSWORD}@"))
    assert wrong.wait_exit() != 0
    assert "Failed to start: nats: authorization violation" in wrong.log
    assert_no_secret(wrong)


def test_embedded_wrong_own_password_fails_without_showing_it(
    run_stanpkg: type[StanpkgRun], tmp_path: Path
) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(
        f'authorization {{\n  user: stan\n  password: "{PASSWORD}"\n}}\n'
        f'streaming {{\n  username: stan\n  password: "{WRONG_PASSWORD}"\n}}\n'
    )
    server = run_stanpkg("-p", "-1", "-c", str(conf))
    assert server.wait_exit() != 0
    assert "authorization violation" in server.log.lower()
    assert_no_secret(server)


async def test_external_token(run_stanpkg: type[StanpkgRun], tmp_path: Path) -> None:
    proc, url = start_nats_process(tmp_path / "nats", f'authorization {{ token: "{TOKEN}" }}')
    try:
        conf = tmp_path / "streaming.conf"
        conf.write_text(f'token: "{TOKEN}"\n')
        server = run_stanpkg("-ns", url, "-sc", str(conf))
        server.wait_ready()
        assert await stan_roundtrip(url, server.cluster_id, token=TOKEN) == EXPECTED
        await assert_refused(url, token=WRONG_PASSWORD)
        assert_no_secret(server)
        server.stop()  # before its NATS server goes
    finally:
        proc.kill()
        proc.wait(10)
