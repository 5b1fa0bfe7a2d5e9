"""A serving node stopped gracefully (SIGTERM: a rolling restart, `systemctl stop`) hands
the cluster over: its JetStream leaderships and the lease go to a running peer whose
replicas are current, so the clients' publishes stall for the successor's promotion
only, not for JetStream's elections (4-9 s each) and a lease time."""

from __future__ import annotations

import signal
import time

import pytest

from tests.cluster.conftest import FIRST_WRITE_TIMEOUT, Cluster, Node
from tests.cluster.test_three_nodes import (
    assert_acked_stored,
    kill_while_publishing,
    leader_of,
    start_three,
    wait_streams_led_by,
)
from tests.server.stan_client import StanClient

pytestmark = pytest.mark.slow

LONGEST_GAP = 2.0  # seconds without a PubAck across a graceful stop (the Go cluster: 9 s)
MOVE_LINE = "Moving the JetStream leader of stream"  # leader_moves.py, on each move asked


def terminate(node: Node) -> None:
    node.proc.send_signal(signal.SIGTERM)


@pytest.mark.timeout(240)
async def test_sigterm_of_the_serving_node_hands_the_cluster_over(cluster: Cluster) -> None:
    nodes = start_three(cluster)
    leader = leader_of(nodes)
    survivors = [n for n in nodes if n is not leader]
    cid = cluster.cluster_id
    # As in a rolling restart: the serving node has settled (it gathered every leader).
    await wait_streams_led_by(leader, survivors[0].url, cid)
    acked, stalls, resent = await kill_while_publishing(
        leader, [n.url for n in survivors], cid, after=200, end=terminate
    )
    assert leader.proc.wait(30) == 0, leader.log()
    successor = leader_of(survivors)
    # From well after the channel's first write (which waits for its stream's leader).
    longest = max(stalls[100:])
    print(f"longest time without a PubAck across a graceful stop: {longest:.2f} s")
    print(f"publishes sent again: {len(resent)}")
    stopped = leader.log()
    # The streaming server's own lines: nats-server's would push them out of the report.
    said = "\n".join(line for line in stopped.splitlines() if "STREAM:" in line)
    assert f'Handing the cluster over to node "{successor.name}"' in stopped, said
    assert f'Cluster handed over to node "{successor.name}" in' in stopped, said
    await assert_acked_stored(successor.url, cid, acked, resent)
    # Every leader was on its server already when it was promoted.
    assert MOVE_LINE not in successor.log(), successor.log()
    assert longest <= LONGEST_GAP, f"{longest:.2f} s without a PubAck"
    # The channel's first write may outwait the client's 2 s on a loaded host (its
    # stream's leader moves first); none after it may.
    late = {n for n in resent if n >= 100}
    assert not late, f"publishes went unanswered: the client sent them again: {late}"


@pytest.mark.timeout(180)
async def test_a_serving_node_without_a_successor_still_stops_at_once(cluster: Cluster) -> None:
    """The peers stopped first: nobody answers for the cluster, the hand-over gives up
    at once, and the node exits 0 well inside a service manager's stop timeout."""
    nodes = start_three(cluster)
    leader = leader_of(nodes)
    others = [n for n in nodes if n is not leader]
    client = await StanClient.connect(leader.url, cluster.cluster_id, "c")
    await client.publish("orders", b"m", timeout=FIRST_WRITE_TIMEOUT)
    await client.close()
    for node in others:
        terminate(node)
    assert [node.proc.wait(30) for node in others] == [0, 0]
    # At once: without its peers the node cannot renew the lease for long.
    started = time.monotonic()
    terminate(leader)
    code = leader.proc.wait(30)
    took = time.monotonic() - started
    print(f"stopped in {took:.2f} s without a successor")
    log = leader.log()
    assert code == 0, log
    assert "No node to hand the cluster over to" in log, log
    assert "[FTL]" not in log, log
    assert took < 6.0
