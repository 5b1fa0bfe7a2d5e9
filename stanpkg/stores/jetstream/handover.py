"""A serving node stopped gracefully (SIGTERM/SIGINT: a rolling restart, `systemctl stop`)
hands the cluster over to one peer.

Released without a word, the lease goes to whichever standby reads it first, while the
JetStream leaderships of the streams stay with this node's nats-server until that one
stops: then they land anywhere, and the new serving node moves each to itself, its first
writes waiting for the moves. Handed over, the chosen peer finds every leader on its own
server and the lease naming it: its promotion starts at once and moves nothing.

* The successor: a peer whose node answers on its node subject (it runs) and whose
  replica of every stream is current (it can lead them at once), in ``peers`` order; when
  none is seen current in time (a loaded host answers stream infos late), the first
  running peer all the same: it catches up as any new serving node does, and one named
  successor beats a race between the standbys.
* The leaderships: each stream's leader is asked to step down in the successor's favour
  (:func:`stream_management.lead_stream_from`, as the serving node gathers them), all at
  once, and looked at until they landed, MOVES_WITHIN at most. Only when the JetStream
  servers are the nodes (embedded: each nats-server's name is its node ID): with an
  external NATS cluster the leaders stay where they are.
* The lease: :meth:`Lease.hand_over` (the key compare-and-set to the successor's ID, which
  the successor takes at once). Without a successor, or when that write fails, the
  lease is released as before (the first standby to read takes it).

The caller has stopped taking publishes and flushed what was queued: replicas catch up
only once nothing more is written. Everything here is bounded: a stop must end well
inside a service manager's stop timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from stanpkg.stores.base import StoreError, StoreLog
from stanpkg.stores.jetstream.layout import node_subject
from stanpkg.stores.jetstream.lease import Lease
from stanpkg.stores.jetstream.stream_management import current_servers, lead_stream_from
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.errors import NatsError

__all__ = ["hand_over_cluster", "hand_over_or_release"]

NODE_PROBE_TIMEOUT = 0.5  # a running peer's node answers at once; a stopped one has no subscriber
CURRENT_WITHIN = 1.0  # for a running peer's replicas to catch up with the last writes
MOVES_WITHIN = 1.5  # for the step-downs to land on the successor
ASK_AGAIN = 0.5  # a step-down that has not landed yet is asked again
RELEASE_WITHIN = 1.0  # for the lease's release when there is no successor
POLL = 0.05
ATTEMPT_TIMEOUT = 0.25  # one look at a stream (its info, the step-down)


async def hand_over_or_release(
    lease: Lease,
    conn: NatsConnection | None,
    log: StoreLog,
    *,
    serving: bool,
    cluster_id: str,
    node_id: str,
    peers: Sequence[str],
    streams: Sequence[str],
) -> str:
    """On a stop: :func:`hand_over_cluster` when this node serves a cluster of several
    nodes, else the lease released (if held). The successor's node ID, or ""."""
    if serving and lease.held and peers and conn is not None and not conn.is_closed:
        return await hand_over_cluster(
            conn, lease, log, cluster_id=cluster_id, node_id=node_id, peers=peers, streams=streams
        )
    await _release(lease)
    return ""


async def hand_over_cluster(
    conn: NatsConnection,
    lease: Lease,
    log: StoreLog,
    *,
    cluster_id: str,
    node_id: str,
    peers: Sequence[str],
    streams: Sequence[str],
) -> str:
    """Hand the lease this node holds, and the leaderships of ``streams``, to a peer; its
    node ID, or "" when the lease was released instead. ``conn``: the store's."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    # The names of the JetStream servers are the node IDs (an embedded nats-server's).
    servers_are_nodes = conn.server_info.get("server_name") == node_id
    try:
        successor = await choose_successor(
            conn, cluster_id, peers, streams if servers_are_nodes else ()
        )
    except (StoreError, NatsError, TimeoutError) as exc:
        log.warn(f"Unable to choose a node to hand the cluster over to: {exc}")
        successor = ""
    if not successor:
        log.notice("No node to hand the cluster over to: releasing the lease")
        await _release(lease)
        return ""
    log.notice(f'Handing the cluster over to node "{successor}"')
    if servers_are_nodes:
        stuck = await move_leaders(conn, streams, successor, MOVES_WITHIN)
        if stuck:
            stream, why = next(iter(stuck.items()))
            log.warn(
                f"The JetStream leader of {len(stuck)} stream(s) did not move to node "
                f'"{successor}" in time ({stream}: {why})'
            )
    try:
        handed = await lease.hand_over(successor)
    except Exception as exc:  # a stop goes on whatever failed
        log.warn(f'Unable to hand the lease over to node "{successor}": {exc}')
        handed = False
    if not handed:
        log.warn(f'Unable to hand the lease over to node "{successor}": releasing it')
        await _release(lease)
        return ""
    await lease.close()  # its connection answered for this node as the lease's holder
    log.notice(f'Cluster handed over to node "{successor}" in {loop.time() - started:.1f} s')
    return successor


async def _release(lease: Lease) -> None:
    """Released, as before the hand-over existed; bounded, since without a quorum (the
    peers stopped first) the delete would wait a whole lease time for nothing."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(lease.release(), RELEASE_WITHIN)


async def choose_successor(
    conn: NatsConnection, cluster_id: str, peers: Sequence[str], streams: Sequence[str]
) -> str:
    """The first of ``peers`` that runs and whose JetStream server (named as the node)
    has a current replica of every one of ``streams``, else (none seen current within
    CURRENT_WITHIN) the first that runs; "" when none runs."""
    running = await _running(conn, cluster_id, peers)
    if not running or not streams:
        return running[0] if running else ""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CURRENT_WITHIN
    while True:
        wait = min(ATTEMPT_TIMEOUT, max(0.05, deadline - loop.time()))  # as in move_leaders
        found = await asyncio.gather(
            *(current_servers(conn, stream, timeout=wait) for stream in streams),
            return_exceptions=True,
        )
        current = [names for names in found if isinstance(names, set)]
        if len(current) == len(found):
            for peer in running:
                if all(peer in names for names in current):
                    return peer
        if loop.time() >= deadline:
            return running[0]
        await asyncio.sleep(POLL)


async def _running(conn: NatsConnection, cluster_id: str, peers: Sequence[str]) -> list[str]:
    async def answers(peer: str) -> bool:
        try:
            await conn.request(node_subject(cluster_id, peer), b"", NODE_PROBE_TIMEOUT)
        except (NatsError, TimeoutError):
            return False  # "no responders" at once when it is not running
        return True

    found = await asyncio.gather(*(answers(peer) for peer in peers))
    return [peer for peer, runs in zip(peers, found, strict=True) if runs]


async def move_leaders(
    conn: NatsConnection, streams: Sequence[str], server: str, within: float
) -> dict[str, str]:
    """Ask the leader of each of ``streams`` to hand its leadership to JetStream server
    ``server``, all at once, until each is led there or ``within`` seconds passed; the
    streams still led elsewhere, with the last answer about each."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    asked: dict[str, float] = {}

    async def move(stream: str) -> str:
        ask = loop.time() - asked.get(stream, -ASK_AGAIN) >= ASK_AGAIN
        # A stream that is electing answers none of the requests sent before its new
        # leader is in: a short wait, and asked again in the next round.
        wait = min(ATTEMPT_TIMEOUT, max(0.05, deadline - loop.time()))
        outcome = await asyncio.wait_for(lead_stream_from(conn, stream, server, ask=ask), wait)
        if outcome == "asked":
            asked[stream] = loop.time()
        return outcome

    pending = {stream: "" for stream in streams}
    while pending:
        outcomes = await asyncio.gather(*(move(s) for s in pending), return_exceptions=True)
        pending = {
            stream: str(outcome) or type(outcome).__name__
            for stream, outcome in zip(pending, outcomes, strict=True)
            if outcome != "here"
        }
        if not pending or loop.time() >= deadline:
            break
        await asyncio.sleep(POLL)
    return pending
