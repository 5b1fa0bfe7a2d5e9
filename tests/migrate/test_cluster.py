"""The Go-written fixtures migrated into a real 3-node stanpkg cluster: the serving node
loads them at once (test_handover.py), and when it stops, the node that takes over loads
them at its promotion and serves what the Go server served after its restart (the
manifest's channels, subscriptions and messages); each durable resumes with the pending
messages the standalone store had for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster
from tests.cluster.test_three_nodes import leader_of, start_three
from tests.migrate.conftest import migrate_json, read_only_fixture
from tests.migrate.served import check_served

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["plain", "aes", "chacha", "expired", "truncated"])
async def test_a_migrated_fixture_is_served_by_the_cluster(
    name: str, tmp_path: Path, cluster: Cluster
) -> None:
    copy = read_only_fixture(name, tmp_path / "source")
    manifest = copy.manifest
    cluster.cluster_id = manifest["cluster_id"]
    nodes = start_three(cluster)
    first_leader = leader_of(nodes)
    extra = ["--permissive"] if name == "truncated" else []
    summary = migrate_json("--config", str(copy.config), "--nats", nodes[0].url, "--verify", *extra)
    assert summary["verified"] is True
    assert summary["replicas"] == 3
    assert summary["handed_over"] is True

    # The serving node stops; the next one loads the migrated state at its promotion.
    first_leader.stop()
    leader = leader_of([n for n in nodes if n is not first_leader])
    await check_served(leader, copy)
