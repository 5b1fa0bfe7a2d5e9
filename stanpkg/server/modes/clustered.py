"""Clustered mode: a placeholder that refuses to start until it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stanpkg.server.errors import StartupError
from stanpkg.server.modes.base import ServingMode

if TYPE_CHECKING:
    from stanpkg.server.server import StreamingServer

__all__ = ["Clustered"]


class Clustered(ServingMode):
    def __init__(self, mode_name: str) -> None:
        self._mode_name = mode_name

    @property
    def state_name(self) -> str:
        return "CLUSTERED"

    async def before_recovery(self, server: StreamingServer) -> None:
        raise StartupError(f"{self._mode_name} mode is not supported by this server yet")
