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
    from stanpkg.transport.connection import NatsConnection

__all__ = ["PROBE_TIMEOUT", "Standalone", "refuse_twin", "twin_ping", "twin_probe"]

NO_TWIN = "Did not detect another server instance"
PROBE_TIMEOUT = 0.25  # how long a twin has to answer the probe


class Standalone(ServingMode):
    def __init__(self, *, probe_for_twin: bool = True) -> None:
        self._probe_for_twin = probe_for_twin
        self._twin_ruled_out = False

    @property
    def state_name(self) -> str:
        return "STANDALONE"

    @property
    def probes_for_twin(self) -> bool:
        return self._probe_for_twin

    def twin_ruled_out(self) -> None:
        """The probe ran already, as the server's connections opened (server/early.py)."""
        self._probe_for_twin = False
        self._twin_ruled_out = True

    async def before_listening(self, server: ModeHost) -> None:
        if self._probe_for_twin:
            discovery = server.info.discovery
            await refuse_twin(server.conn, discovery, server.plan.cluster_id)
            self._twin_ruled_out = True
        if self._twin_ruled_out:
            # Logged here, where the reference logs it: after recovery, before the subjects
            # (the probe itself may have run as the connections opened).
            server.log.debug(NO_TWIN)


def twin_probe(cid: str, inbox: str) -> bytes:
    """The probe: a connect request with the cluster ID as client ID."""
    return pb.ConnectRequest(clientID=cid, heartbeatInbox=inbox).SerializeToString()


def twin_ping(discovery: str) -> tuple[str, bytes]:
    """A probe that leaves the discover subject alone (for a server already holding it,
    server/claim.py): a ping no client sent, which a serving server answers ("gone")."""
    return f"{discovery}.pings", pb.Ping(connID=b"stanpkg-twin-probe").SerializeToString()


async def refuse_twin(conn: NatsConnection, discovery: str, cid: str) -> None:
    """protocol.md §14: refuse to run beside another server with our cluster ID. The
    probe is a connect request with the cluster ID as client ID on the discovery subject;
    an answer means someone serves it."""
    try:
        raw = await conn.request(discovery, twin_probe(cid, conn.new_inbox()), PROBE_TIMEOUT)
    except (NatsError, TimeoutError):
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
            conn.publish(resp.closeRequests, close)
            await conn.flush()
    raise StartupError(f'discovered another streaming server with cluster ID "{cid}"')
