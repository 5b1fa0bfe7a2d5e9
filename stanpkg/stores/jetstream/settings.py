"""What the clustered store takes from the plan, resolved once by the node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stanpkg.plan.options import int_default
from stanpkg.stores.jetstream.layout import DEFAULT_CHANNEL_STREAMS, records_bucket

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan

__all__ = ["MAX_REPLICAS", "ClusterSettings"]

MAX_REPLICAS = 5  # JetStream's limit


@dataclass(frozen=True)
class ClusterSettings:
    """What the clustered store takes from the plan (resolved by the node)."""

    cluster_id: str
    node_id: str
    peers: tuple[str, ...]
    replicas: int
    lease_ttl: float  # seconds without renewal after which a standby takes over
    channel_streams: int = DEFAULT_CHANNEL_STREAMS  # shared streams new channels go to
    read_cache: int = int_default("cluster.read_cache")  # bytes of messages kept in memory
    pack_bytes: int = int_default("cluster.pack_bytes")  # a pack of messages at most

    @classmethod
    def from_plan(cls, plan: Plan) -> ClusterSettings:
        cluster = plan.cluster
        return cls(
            cluster_id=plan.cluster_id,
            node_id=cluster.node_id,
            peers=cluster.peers,
            replicas=max(1, min(1 + len(cluster.peers), MAX_REPLICAS)),
            # Twice the reference's election timeout (4 s by default): JetStream's own
            # elections of the lease bucket's leader take 1-2 s, which a holder must ride
            # out without losing the lease.
            lease_ttl=max(2 * cluster.raft_election_timeout, cluster.raft_lease_timeout) / 1e9,
            channel_streams=cluster.channel_streams,
            read_cache=cluster.read_cache,
            pack_bytes=cluster.pack_bytes,
        )

    @property
    def bucket(self) -> str:
        """The KV bucket of the cluster's records (:func:`layout.records_bucket`)."""
        return records_bucket(self.cluster_id)
