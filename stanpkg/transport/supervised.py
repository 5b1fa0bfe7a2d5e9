"""The embedded nats-server, started again whenever it dies while the node runs.

The reference links nats-server into its own process, so the two die together; ours is a
child process (embedded.py) that can die alone (killed, OOM). Then the streaming server
loses NATS as it would lose an external one and reconnects (server/nats_link.py), so the
child is started again on the port it had: the streaming server and the clients find it
where they left it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable

from stanpkg.transport.embedded import EmbeddedNatsConfig, EmbeddedNatsServer
from stanpkg.transport.errors import NatsError

__all__ = ["FIRST_RETRY_WAIT", "MAX_RETRY_WAIT", "SupervisedNatsServer"]

FIRST_RETRY_WAIT = 0.5  # seconds before trying again when a restart fails
MAX_RETRY_WAIT = 10.0


class SupervisedNatsServer:
    """``start()``/``stop()`` as :class:`EmbeddedNatsServer`. ``on_event(level, text)``
    says when the child died and was started again ("ERR"/"INF");
    ``on_restarted()`` is called once a new child serves (its pid and monitor port
    changed); while ``wanted()`` is False (the node stops) a dead child stays dead."""

    def __init__(
        self,
        config: EmbeddedNatsConfig,
        *,
        on_log: Callable[[str], None],
        on_event: Callable[[str, str], None],
        on_restarted: Callable[[], None],
        wanted: Callable[[], bool] = lambda: True,
        binary: str = "",
        on_listening: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.config = config
        self._on_log = on_log
        self._on_event = on_event
        self._on_restarted = on_restarted
        self._wanted = wanted  # False once the node is on its way out: no restart then
        self._binary = binary
        self._on_listening = on_listening  # the first start's only (embedded.py)
        self._current: EmbeddedNatsServer | None = None
        self._restarting: asyncio.Task[None] | None = None
        self._stopping = False
        self.restarts = 0

    def _new(self, on_listening: Callable[[str, int], bool] | None = None) -> EmbeddedNatsServer:
        return EmbeddedNatsServer(
            self.config,
            on_log=self._on_log,
            on_exit=self._exited,
            binary=self._binary,
            on_listening=on_listening,
        )

    @property
    def current(self) -> EmbeddedNatsServer:
        if self._current is None:
            raise NatsError("the embedded nats-server is not running")
        return self._current

    async def start(self, timeout: float = 10.0) -> None:
        server = self._new(self._on_listening)
        await server.start(timeout)
        self._current = server
        # A port picked at random (-1) stays this one for every later start.
        self.config = dataclasses.replace(self.config, port=server.client_port)

    def _exited(self, code: int) -> None:
        if self._stopping or not self._wanted():
            return
        self._on_event(
            "ERR", f"NATS server exited unexpectedly (exit status {code}), starting it again"
        )
        self._restarting = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        wait = FIRST_RETRY_WAIT
        while not self._stopping and self._wanted():
            server = self._new()
            try:
                await server.start()
            except (NatsError, OSError) as exc:
                self._on_event(
                    "ERR", f"Unable to start the NATS server again: {exc} (retrying in {wait:g}s)"
                )
                await asyncio.sleep(wait)
                wait = min(wait * 2, MAX_RETRY_WAIT)
                continue
            if self._stopping:
                await server.stop()
                return
            self._current = server
            self.restarts += 1
            self._on_event("INF", f"NATS server started again (pid {server.pid})")
            self._on_restarted()
            return

    async def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        task = self._restarting
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._current is not None:
            await self._current.stop(timeout)

    # -- what the current child bound --------------------------------------------------

    @property
    def version(self) -> str:
        """The running child's version, from its banner ("" when not known)."""
        return self._current.version if self._current is not None else ""

    @property
    def client_url(self) -> str:
        return self.current.client_url

    @property
    def internal_monitor_port(self) -> int | None:
        return self.current.internal_monitor_port

    @property
    def pid(self) -> int:
        return self.current.pid
