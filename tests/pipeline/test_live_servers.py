"""The live source's client side against other servers and settings: the Go reference
``nats-streaming-server`` (protocol and monitoring), and NATS authentication."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stanpkg.pipeline.live_client import (
    ChannelBounds,
    LiveSourceError,
    RangeRead,
    channel_bounds,
    check_connection,
    iter_range,
)
from stanpkg.pipeline.live_options import LiveOptions
from tests.pipeline.live_helpers import LiveServer, payloads

GO_SERVER = Path(sys.executable).parent / "nats-streaming-server"


@pytest.fixture(scope="module")
def go_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    binary = str(GO_SERVER) if GO_SERVER.exists() else shutil.which("nats-streaming-server")
    if binary is None:
        pytest.skip("the Go nats-streaming-server is not installed")
    server = LiveServer(tmp_path_factory.mktemp("live-go"), "-mm", "5", command=[binary])
    yield server
    server.stop()


@pytest.mark.parametrize("monitor", [True, False])
def test_go_reference_server(go_server: LiveServer, monitor: bool) -> None:
    channel = f"go.{'m' if monitor else 'p'}"
    go_server.publish(channel, payloads(channel, 1, 12))  # 1..7 removed by max_msgs 5
    no_monitor = {} if monitor else {"monitor": ""}
    options = LiveOptions.parse(
        go_server.options(channels="go.*" if monitor else channel, **no_monitor)
    )
    check_connection(options.connection)
    assert channel_bounds(options)[channel] == ChannelBounds(8, 12)
    read = RangeRead()
    batches = iter_range(options, channel, 9, 12, 2, read)
    got = [pair for b in batches for pair in zip(b.sequence, b.data, strict=True)]
    assert got == list(zip(range(10, 13), payloads(channel, 10, 12), strict=True))
    with pytest.raises(LiveSourceError, match=rf"channel {channel}: messages 3\.\.7 were removed"):
        list(iter_range(options, channel, 2, 12, 100, RangeRead()))


def test_user_and_password(start_live_server: Callable[..., LiveServer]) -> None:
    server = start_live_server("--user", "reader", "--pass", "s3cret")
    base = {**server.options(channels="a", connectTimeout="2"), "user": "reader"}
    check_connection(LiveOptions.parse({**base, "password": "s3cret"}).connection)
    with pytest.raises(LiveSourceError, match="servers: cannot connect to NATS") as err:
        check_connection(LiveOptions.parse({**base, "password": "wrong"}).connection)
    assert "s3cret" not in str(err.value) and "wrong" not in str(err.value)
