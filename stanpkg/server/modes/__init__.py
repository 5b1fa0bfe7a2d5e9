"""How a server comes to serve: the one seam between the server core and its modes.

The core (:mod:`stanpkg.server.server`) connects, recovers the store and listens; a
:class:`ServingMode` decides what happens around recovery — a standalone server makes
sure it is alone with its cluster ID, a fault-tolerant one waits until it holds the
store, a clustered one (not yet) would join its peers. The core asks the mode for its
state name and whether it stands by, and knows nothing else of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stanpkg.server.modes.base import ServingMode
from stanpkg.server.modes.standalone import Standalone

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan
    from stanpkg.server.modes.clustered import Clustered
    from stanpkg.server.modes.fault_tolerant import FaultTolerant

__all__ = ["Clustered", "FaultTolerant", "ServingMode", "Standalone", "mode_for"]


def __getattr__(name: str) -> Any:
    # The other modes are imported when asked for: a standalone start does not pay for
    # the clustered mode's JetStream store.
    if name == "Clustered":
        from stanpkg.server.modes.clustered import Clustered

        return Clustered
    if name == "FaultTolerant":
        from stanpkg.server.modes.fault_tolerant import FaultTolerant

        return FaultTolerant
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def mode_for(plan: Plan) -> ServingMode:
    """The mode the plan asks for."""
    if plan.cluster.clustered:
        from stanpkg.server.modes.clustered import Clustered

        cluster = plan.cluster
        return Clustered(
            cluster.node_id,
            cluster.log_path,
            cluster.peers,
            allow_add_remove_node=cluster.allow_add_remove_node,
        )
    if plan.ft_group:
        from stanpkg.server.modes.fault_tolerant import FaultTolerant

        return FaultTolerant()
    # Partitioned servers share a cluster ID by design: no probe for a twin.
    return Standalone(probe_for_twin=not plan.partitioning)
