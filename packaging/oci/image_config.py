"""Sets the configuration of the OCI image that packaging/oci/build.sh assembled with umoci:
how it runs (``stanpkg run`` with the packaged configuration, entrypoint.sh), its user,
ports, volume, health check and labels.

By hand because no OCI tool writes a health check into an OCI image: the OCI config has no
field for it, buildah keeps it only in Docker's format and drops it when it writes an OCI
layout, and umoci has no option. Docker reads the ``Healthcheck`` key of the config as it
does in its own format (the OCI spec lets readers ignore keys they do not know). The rest
is the digest bookkeeping a changed config needs: a new config blob, a new manifest that
names it, the index that names the manifest.

    python3 image_config.py LAYOUT TAG VERSION
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SECOND_NS = 1_000_000_000
# The health check asks the monitoring endpoint (http_port 8222 of the image's stan.conf).
HEALTH_URL = "http://127.0.0.1:8222/streaming/serverz"
HEALTH_COMMAND = [
    "CMD",
    "/opt/stanpkg/bin/python",
    "-c",
    f"import urllib.request; urllib.request.urlopen({HEALTH_URL!r}, timeout=3)",
]
ENTRYPOINT = "/usr/local/bin/stanpkg-entrypoint"  # packaging/oci/entrypoint.sh (build.sh)
UID = 10001  # the image's stanpkg user (build.sh creates it); numeric for runAsNonRoot


def image_config(version: str) -> dict[str, Any]:
    """The ``config`` of the image: what a runtime starts and how."""
    return {
        "User": f"{UID}:{UID}",
        # stanpkg run -sc /etc/stanpkg/stan.conf, the container's arguments added after it
        # (packaging/oci/entrypoint.sh): arguments given to the image change the packaged
        # configuration instead of replacing it, as a Cmd would be.
        "Entrypoint": [ENTRYPOINT],
        "WorkingDir": "/data",
        "Env": [
            "PATH=/opt/stanpkg/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ],
        # Clients, monitoring, and the NATS cluster's routes (clustered nodes).
        "ExposedPorts": {"4222/tcp": {}, "8222/tcp": {}, "6222/tcp": {}},
        "Volumes": {"/data": {}},
        "StopSignal": "SIGTERM",
        "Healthcheck": {
            "Test": HEALTH_COMMAND,
            "Interval": 10 * SECOND_NS,
            "Timeout": 5 * SECOND_NS,
            "StartPeriod": 20 * SECOND_NS,
            "Retries": 3,
        },
        "Labels": {
            "org.opencontainers.image.title": "stanpkg",
            "org.opencontainers.image.description": "NATS Streaming (STAN) server",
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.licenses": "Apache-2.0",
            "org.opencontainers.image.source": "https://github.com/stanpkg/stanpkg",
        },
    }


def _blob(layout: Path, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _read(layout: Path, digest: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()
    )
    return data


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def configure(layout: Path, tag: str, version: str, created: str) -> None:
    index = json.loads((layout / "index.json").read_text())
    entry = next(
        m
        for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    )
    manifest = _read(layout, entry["digest"])
    config = _read(layout, manifest["config"]["digest"])
    config["created"] = created
    config["author"] = "stanpkg"
    config["config"] = image_config(version)
    for step in config.get("history", []):
        step["created"] = created
    stale = [manifest["config"]["digest"], entry["digest"]]
    manifest["config"].update(_blob(layout, _encode(config)))
    manifest["annotations"] = {"org.opencontainers.image.created": created}
    entry.update(_blob(layout, _encode(manifest)))
    (layout / "index.json").write_bytes(_encode(index))
    for digest in stale:
        (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).unlink()


def main(argv: list[str]) -> int:
    layout, tag, version = Path(argv[0]), argv[1], argv[2]
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    configure(layout, tag, version, created)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
