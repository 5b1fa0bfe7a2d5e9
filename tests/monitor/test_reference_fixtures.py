"""Datastores written by the Go reference server: once recovered, our monitoring must
report what the reference reported for them (the ``expected`` section of each
fixtures/filestore/*/MANIFEST.json was read from the reference's own endpoints)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.monitor.conftest import MonitoredProcess

FIXTURES = Path("/work/shared/fixtures/filestore")
NAMES = ["plain", "aes", "chacha", "truncated", "expired"]

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="reference fixtures not present")


def _by_inbox(subs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # "in the order the server listed them (the order carries no meaning)"
    return sorted(subs, key=lambda sub: sub["inbox"])


@pytest.mark.parametrize("name", NAMES)
def test_monitoring_matches_the_reference(name: str, tmp_path: Path) -> None:
    fixture = FIXTURES / name
    manifest = json.loads((fixture / "MANIFEST.json").read_text())
    expected = manifest["expected"]
    shutil.copytree(fixture / "datastore", tmp_path / "datastore")
    conf = tmp_path / "stan.conf"
    conf.write_text(
        manifest["production"]["server_config"].replace("{DATASTORE}", str(tmp_path / "datastore"))
    )
    extra = ("-file_truncate_bad_eof",) if name == "truncated" else ()
    proc = MonitoredProcess(("-sc", str(conf), "-m", "-1", *extra), manifest["cluster_id"])
    try:
        proc.wait_for("Streaming Server is ready")
        serverz = json.loads(proc.get("/streaming/serverz").text)
        assert {key: serverz[key] for key in expected["server"]} == expected["server"]
        storez = json.loads(proc.get("/streaming/storez").text)
        assert (storez["type"], storez["limits"]) == (expected["store_type"], expected["limits"])
        for channel in expected["channels"]:
            got = json.loads(
                proc.get(f"/streaming/channelsz?channel={channel['name']}&subs=1").text
            )
            assert {k: got[k] for k in channel if k != "subscriptions"} == {
                k: v for k, v in channel.items() if k != "subscriptions"
            }
            assert _by_inbox(got.get("subscriptions", [])) == _by_inbox(channel["subscriptions"])
        listed = json.loads(proc.get("/streaming/clientsz").text)
        assert [c["id"] for c in listed["clients"]] == [c["id"] for c in expected["clients"]]
        for client in expected["clients"]:
            got = json.loads(proc.get(f"/streaming/clientsz?client={client['id']}&subs=1").text)
            subs = got.pop("subscriptions", {})
            assert got == {k: v for k, v in client.items() if k != "subscriptions"}
            assert {k: _by_inbox(v) for k, v in subs.items()} == {
                k: _by_inbox(v) for k, v in client["subscriptions"].items()
            }
    finally:
        proc.stop()
