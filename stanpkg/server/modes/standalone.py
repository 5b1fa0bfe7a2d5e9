"""Standalone mode: one server per cluster ID, which it checks before serving."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server.errors import StartupError
from stanpkg.server.modes.base import ServingMode
from stanpkg.transport.errors import NatsError

if TYPE_CHECKING:
    from stanpkg.server.host import ModeHost

__all__ = ["PROBE_TIMEOUT", "Standalone"]

PROBE_TIMEOUT = 0.25  # how long a twin has to answer the probe


class Standalone(ServingMode):
    def __init__(self, *, probe_for_twin: bool = True) -> None:
        self._probe_for_twin = probe_for_twin

    @property
    def state_name(self) -> str:
        return "STANDALONE"

    async def before_listening(self, server: ModeHost) -> None:
        if self._probe_for_twin:
            await _refuse_twin(server)


async def _refuse_twin(server: ModeHost) -> None:
    """protocol.md §14: refuse to run beside another server with our cluster ID. The
    probe is a connect request with the cluster ID as client ID on the (recovered)
    discovery subject; an answer means someone serves it."""
    cid = server.plan.cluster_id
    req = pb.ConnectRequest(clientID=cid, heartbeatInbox=server.new_inbox())
    try:
        raw = await server.conn.request(
            server.info.discovery, req.SerializeToString(), PROBE_TIMEOUT
        )
    except (NatsError, TimeoutError):
        server.log.debug("Did not detect another server instance")
        return
    try:
        resp = pb.ConnectResponse.FromString(raw)
    except DecodeError as exc:
        raise StartupError(
            f"unmarshall error while detecting another server instance: {exc}"
        ) from exc
    if resp.closeRequests:
        # The twin registered our probe as a client: take it back.
        close = pb.CloseRequest(clientID=cid).SerializeToString()
        with contextlib.suppress(NatsError):
            server.conn.publish(resp.closeRequests, close)
            await server.conn.flush()
    raise StartupError(f'discovered another streaming server with cluster ID "{cid}"')
