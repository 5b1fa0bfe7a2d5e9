"""Fault-tolerant mode (``ft_group``): stand by until this server holds the store.

This is the mode's side, the hooks the server calls; which server of the group is
active, and how the group's servers tell each other, is ``ft_election.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stanpkg.server.errors import StartupError
from stanpkg.server.modes.base import ServingMode
from stanpkg.server.modes.ft_election import FtElection, ft_subject
from stanpkg.stores.base import StoreError

if TYPE_CHECKING:
    from stanpkg.server.host import ModeHost

__all__ = ["FaultTolerant"]


class FaultTolerant(ServingMode):
    def __init__(self) -> None:
        self._election: FtElection | None = None

    @property
    def state_name(self) -> str:
        return "FT_STANDBY" if self.standing_by else "FT_ACTIVE"

    @property
    def standing_by(self) -> bool:
        return self._election is None or not self._election.active

    async def before_recovery(self, server: ModeHost) -> None:
        """Returns once this server is the active one of its group (internal-protocol.md
        §3.3); the store is not read before."""
        plan, log = server.plan, server.log
        log.notice("Starting in standby mode")
        election = self._election = FtElection(
            subject=ft_subject(plan.cluster_id, plan.ft_group),
            server_id=server.server_id,
            store=server.store,
            log=log,
            on_fatal=server.fatal,
        )
        # The acks connection: the publish flood on ``conn`` never delays a rival's
        # heartbeat.
        election.listen(server.acks_conn)
        await server.acks_conn.flush()
        if server.on_standby is not None:
            server.on_standby()
        try:
            await election.wait_until_active(server.fatal)
        except StoreError as exc:
            raise StartupError(str(exc)) from exc
        log.notice("Server is active")
        election.start_heartbeats(server.conn.publish)

    async def stop(self) -> None:
        if self._election is not None:
            await self._election.stop()
