"""The clustered store's phases, each an object built whole when the phase begins, so
that nothing in it is ever missing:

* ``Link``: connected to JetStream (``ClusteredStore.connect``);
* ``Contention``: the records opened and the lease contended for; while standing by,
  the standby view reads the records for monitoring;
* ``ServingTerm``: the lease taken and the records read; the writer laid out as they
  say, the promotion's channel loads, the moves of the streams' leaders to this node.

A node that loses the lease keeps its term's objects until it closes (the server steps
back to standby with a new store), but ``Contention.serving`` is false from then on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stanpkg.stores.jetstream.channel_loads import ChannelLoads
from stanpkg.stores.jetstream.cluster_writer import ClusterWriter
from stanpkg.stores.jetstream.leader_moves import SharedStreamMoves
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.standby_view import StandbyView
from stanpkg.transport.connection import NatsConnection

if TYPE_CHECKING:
    from stanpkg.transport.endpoint import NatsEndpoint

__all__ = ["Contention", "Link", "ServingTerm"]


@dataclass(frozen=True)
class Link:
    """The store's connection, and where the lease connects its own (``lease.py``)."""

    conn: NatsConnection
    endpoint: NatsEndpoint


@dataclass(eq=False)
class Contention:
    """The cluster's records and the lease this node holds or waits for."""

    link: Link
    records: ReplicatedMap
    lease: Lease
    standby: StandbyView  # runs only while the lease is someone else's
    on_lost: Callable[[str], None]  # the server's: this node steps back to standby
    serving: bool = False  # the lease taken, and not lost since


@dataclass(eq=False)
class ServingTerm:
    """This node's term as the serving node."""

    contention: Contention
    writer: ClusterWriter
    loads: ChannelLoads  # the promotion's: each channel served once its stream answers
    moves: SharedStreamMoves | None  # None with one replica: no leader to move

    @property
    def records(self) -> ReplicatedMap:
        return self.contention.records

    def stop_moves(self) -> None:
        """No leader is moved here any more (the lease is lost: see ``leader_moves``)."""
        if self.moves is not None:
            self.moves.cancel()

    def stop(self) -> None:
        """The promotion's loads and the leaders' moves stopped."""
        self.stop_moves()
        self.loads.cancel()
