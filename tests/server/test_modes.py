"""The mode seam: the plan picks the mode, and the server calls its hooks in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.server.errors import StartupError
from stanpkg.server.log import Logger
from stanpkg.server.modes import Clustered, FaultTolerant, ServingMode, Standalone, mode_for
from stanpkg.server.server import StreamingServer
from stanpkg.stores.memory import MemoryStore
from stanpkg.transport.endpoint import NatsEndpoint
from tests.server.conftest import LogCapture, make_plan


@pytest.mark.parametrize(
    ("args", "kind", "state"),
    [
        ((), Standalone, "STANDALONE"),
        (("-ft_group", "g"), FaultTolerant, "FT_STANDBY"),
        (("-clustered", "-cluster_node_id", "a"), Clustered, "CLUSTERED"),
    ],
)
def test_the_plan_picks_the_mode(
    args: tuple[str, ...], kind: type, state: str, tmp_path: Path
) -> None:
    mode = mode_for(make_plan("-st", "file", "-dir", str(tmp_path), *args))
    assert isinstance(mode, kind)
    assert mode.state_name == state


class _Recording(ServingMode):
    """Notes what the server has done when each hook runs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, bool]] = []

    @property
    def state_name(self) -> str:
        return "RECORDING"

    def _note(self, hook: str, server: StreamingServer) -> None:
        self.seen.append((hook, hasattr(server, "channels"), server.ready))

    async def before_recovery(self, server: StreamingServer) -> None:
        self._note("before_recovery", server)

    async def before_listening(self, server: StreamingServer) -> None:
        self._note("before_listening", server)

    async def stop(self) -> None:
        self.seen.append(("stop", True, False))


async def test_the_server_calls_the_hooks_in_order(nats_url: str) -> None:
    plan = make_plan()
    log = Logger(stream=LogCapture(), debug=False, trace=False)
    mode = _Recording()
    server = StreamingServer(plan, MemoryStore(plan.store_limits, log), log, mode=mode)
    await server.start(NatsEndpoint(nats_url))
    assert server.state == "RECORDING"
    await server.stop()
    assert server.state == "SHUTDOWN"
    assert mode.seen == [
        ("before_recovery", False, False),  # the store is not read before
        ("before_listening", True, False),  # recovered, not answering clients yet
        ("stop", True, False),
    ]


async def test_clustered_mode_refuses_to_start_until_built(nats_url: str, tmp_path: Path) -> None:
    plan = make_plan("-st", "file", "-dir", str(tmp_path), "-clustered", "-cluster_node_id", "a")
    log = Logger(stream=LogCapture(), debug=False, trace=False)
    server = StreamingServer(plan, MemoryStore(plan.store_limits, log), log, mode=mode_for(plan))
    with pytest.raises(StartupError, match="clustered mode is not supported by this server yet"):
        await server.start(NatsEndpoint(nats_url))
    await server.stop()
