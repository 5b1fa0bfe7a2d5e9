"""Clustered mode: every node of the cluster runs; the one holding the cluster's lease
serves (the reference's Raft leader), the others stand by and take over when it lapses.

The replicated state and the lease live in the store (the clustered store keeps both in
JetStream): this mode only orders the node's start-up the way the reference logs it —
cluster lines and the store limits first, then, once this node leads, the promotion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stanpkg.server.errors import StartupError
from stanpkg.server.modes.base import ServingMode
from stanpkg.stores.base import StoreError
from stanpkg.transport.errors import NatsError

if TYPE_CHECKING:
    from stanpkg.server.server import StreamingServer

__all__ = ["NODE_PROBE_TIMEOUT", "Clustered", "node_subject"]

NODE_PROBE_TIMEOUT = 0.5  # how long a node with our ID has to answer


def node_subject(cluster_id: str, node_id: str) -> str:
    """Where a running node answers for its node ID (so that a second one is refused)."""
    return f"_STAN.node.{cluster_id}.{node_id}"


class Clustered(ServingMode):
    def __init__(self, node_id: str, log_path: str, peers: tuple[str, ...]) -> None:
        self.node_id = node_id
        self.log_path = log_path
        self.peers = peers
        self._leading = False
        self._sid: int | None = None

    @property
    def state_name(self) -> str:
        return "CLUSTERED"

    @property
    def promotions(self) -> int:
        # A node that loses the lease stops: at most one promotion per process, and a
        # restarted node counts from 0 (Prometheus' increase() sees each).
        return 1 if self._leading else 0

    @property
    def role(self) -> str:
        return "Leader" if self._leading else "Follower"

    @property
    def standing_by(self) -> bool:
        return not self._leading

    async def before_recovery(self, server: StreamingServer) -> None:
        """Refuse to run beside a node with the same ID (its lease would be ours), then
        answer for this ID."""
        subject = node_subject(server.plan.cluster_id, self.node_id)
        try:
            await server.conn.request(subject, b"", NODE_PROBE_TIMEOUT)
        except (NatsError, TimeoutError):
            pass
        else:
            raise StartupError(
                f'cluster node ID "{self.node_id}" is already in use by another node'
            )
        self._sid = server.conn.subscribe(
            subject, lambda _s, reply, _d: server.conn.publish(reply, b"") if reply else None
        )

    async def stop(self) -> None:
        self._sid = None  # the server's connection closes with it

    async def before_listening(self, server: StreamingServer) -> None:
        log = server.log
        log.notice(f"Cluster Node ID : {self.node_id}")
        log.notice(f"Cluster Log Path: {self.log_path}")
        if self.peers:
            log.notice("Cluster known peers:")
            for number, peer in enumerate(self.peers, 1):
                log.notice(f'peer {number}: "{peer}"')
        server.log_store_banner()
        if server.on_standby is not None:
            server.on_standby()  # a follower is a healthy service too
        try:
            # Returns once this node holds the lease, with the store caught up on
            # everything the previous leader had replicated.
            await server.store.acquire_exclusive_lock(server.fatal)
        except StoreError as exc:
            raise StartupError(str(exc)) from exc
        self._leading = True
        log.notice("server became leader, performing leader promotion actions")
        server.recover_state(quiet=True)
        log.notice("finished leader promotion actions")
