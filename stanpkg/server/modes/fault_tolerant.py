"""Fault-tolerant mode (``ft_group``): stand by until this server holds the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stanpkg.server.errors import StartupError
from stanpkg.server.fault_tolerance import FaultTolerance, ft_subject
from stanpkg.server.modes.base import ServingMode
from stanpkg.stores.base import StoreError

if TYPE_CHECKING:
    from stanpkg.server.host import ModeHost

__all__ = ["FaultTolerant"]


class FaultTolerant(ServingMode):
    def __init__(self) -> None:
        self._group: FaultTolerance | None = None

    @property
    def state_name(self) -> str:
        return "FT_STANDBY" if self.standing_by else "FT_ACTIVE"

    @property
    def standing_by(self) -> bool:
        return self._group is None or not self._group.active

    async def before_recovery(self, server: ModeHost) -> None:
        """Returns once this server is the active one of its group (internal-protocol.md
        §3.3); the store is not read before."""
        plan, log = server.plan, server.log
        log.notice("Starting in standby mode")
        group = self._group = FaultTolerance(
            subject=ft_subject(plan.cluster_id, plan.ft_group),
            server_id=server.server_id,
            store=server.store,
            log=log,
            on_fatal=server.fatal,
        )
        # The acks connection: the publish flood on ``conn`` never delays a rival's
        # heartbeat.
        group.listen(server.acks_conn)
        await server.acks_conn.flush()
        if server.on_standby is not None:
            server.on_standby()
        try:
            await group.wait_until_active(server.fatal)
        except StoreError as exc:
            raise StartupError(str(exc)) from exc
        log.notice("Server is active")
        group.start_heartbeats(server.conn.publish)

    async def stop(self) -> None:
        if self._group is not None:
            await self._group.stop()
