"""The mode seam: the plan picks the mode, and the server calls its hooks in order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stanpkg.server.log import Logger
from stanpkg.server.modes import Clustered, FaultTolerant, ServingMode, Standalone, mode_for
from stanpkg.server.server import StreamingServer
from stanpkg.stores.base import RecoveredState
from stanpkg.stores.encryption import EncryptingStore
from stanpkg.stores.factory import create_store
from stanpkg.stores.jetstream.store import ClusteredStore
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


class _NotingStore(MemoryStore):
    """A memory store that notes whether the server has read it."""

    read = False

    def recover(self) -> RecoveredState | None:
        self.read = True
        return super().recover()


class _Recording(ServingMode):
    """Notes what the server has done when each hook runs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, bool]] = []

    @property
    def state_name(self) -> str:
        return "RECORDING"

    def _note(self, hook: str, server: StreamingServer) -> None:
        store = server.store
        self.seen.append((hook, isinstance(store, _NotingStore) and store.read, server.ready))

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
    server = StreamingServer(plan, _NotingStore(plan.store_limits, log), log, mode=mode)
    await server.start(NatsEndpoint(nats_url))
    assert server.state == "RECORDING"
    await server.stop()
    assert server.state == "SHUTDOWN"
    assert mode.seen == [
        ("before_recovery", False, False),  # the store is not read before
        ("before_listening", True, False),  # recovered, not answering clients yet
        ("stop", True, False),
    ]


class _LeaseStore(MemoryStore):
    """A memory store whose lock (the cluster's lease) is granted when the test says."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.granted = asyncio.Event()

    async def acquire_exclusive_lock(self, on_lost: Callable[[str], None]) -> bool:
        await self.granted.wait()
        return True


async def test_clustered_node_logs_as_the_reference_and_serves_once_it_leads(
    nats_url: str, tmp_path: Path
) -> None:
    plan = make_plan(
        "-st",
        "file",
        "-dir",
        str(tmp_path),
        "-clustered",
        "-cluster_node_id",
        "a",
        "-cluster_peers",
        "b,c",
        "-cluster_log_path",
        "rl",
    )
    capture = LogCapture()
    log = Logger(stream=capture, debug=False, trace=False)
    store = _LeaseStore(plan.store_limits, log)
    server = StreamingServer(plan, store, log, mode=mode_for(plan))
    starting = asyncio.create_task(server.start(NatsEndpoint(nats_url)))
    await asyncio.sleep(0.3)
    assert not starting.done()
    assert (server.state, server.mode.role, server.standing_by) == ("CLUSTERED", "Follower", True)
    store.granted.set()
    await starting
    assert server.mode.role == "Leader" and not server.standing_by
    await server.stop()
    lines = [line.partition("STREAM: ")[2] for line in capture.lines()]
    start = lines.index("Recovering the state...")
    assert lines[start : start + 6] == [
        "Recovering the state...",
        "No recovered state",
        "Cluster Node ID : a",
        "Cluster Log Path: rl",
        "Cluster known peers:",
        'peer 1: "b"',
    ]
    assert lines[start + 7] == "Message store is RAFT_FILE"
    promotion = lines.index("server became leader, performing leader promotion actions")
    assert lines.index("----------------------------------") < promotion
    assert lines[promotion + 1] == "finished leader promotion actions"
    assert lines[promotion + 2] == "Streaming Server is ready"


def test_a_clustered_plan_gets_the_clustered_store(tmp_path: Path) -> None:
    args = ("-st", "file", "-dir", str(tmp_path), "-clustered", "-cluster_node_id", "a")
    log = Logger(stream=LogCapture(), debug=False, trace=False)
    store = create_store(make_plan(*args, "-cluster_peers", "b,c"), log)
    assert isinstance(store, ClusteredStore)
    assert (store.settings.node_id, store.settings.replicas) == ("a", 3)
    encrypted = create_store(make_plan(*args, "-encrypt", "-encryption_key", "k"), log)
    assert isinstance(encrypted, EncryptingStore) and isinstance(encrypted.inner, ClusteredStore)
