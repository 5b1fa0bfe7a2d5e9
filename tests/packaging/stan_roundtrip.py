"""A STAN client round trip against an installed server, run as its own process so the
tests can start it inside a container's network namespace (``nsenter -n``).

``python -m tests.packaging.stan_roundtrip URL CLUSTER_ID CHANNEL COUNT [--expect-stored N]``
publishes COUNT messages to CHANNEL and receives them on a live subscription; with
``--expect-stored N`` it first replays the channel from the start and checks that N
messages were already stored (what survives a restart with the FILE store). Prints one
JSON line; exit status 0 when everything arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from stanpkg.proto import protocol_pb2 as pb
from tests.server.stan_client import StanClient


async def roundtrip(
    url: str, cluster_id: str, channel: str, count: int, stored: int
) -> dict[str, object]:
    deadline = asyncio.get_running_loop().time() + 20
    while True:  # the service may still be starting: retry the connect for a while
        try:
            client = await StanClient.connect(url, cluster_id, "pkg-test")
            break
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)
    result: dict[str, object] = {}
    if stored >= 0:
        replay = await client.subscribe(channel, start=pb.First)
        old = await replay.collect(stored, timeout=5) if stored else []
        await replay.assert_nothing(0.3)
        result["replayed"] = [m.data.decode() for m in old]
        await replay.close()
    live = await client.subscribe(channel)
    first = len(result.get("replayed", []))  # type: ignore[arg-type]
    sent = [f"msg-{first + i}" for i in range(count)]
    for data in sent:
        await client.publish(channel, data.encode())
    got = await live.collect(count, timeout=5)
    result["received"] = [m.data.decode() for m in got]
    result["ok"] = result["received"] == sent
    await client.close()
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("cluster_id")
    parser.add_argument("channel")
    parser.add_argument("count", type=int)
    parser.add_argument("--expect-stored", type=int, default=-1)
    args = parser.parse_args()
    result = asyncio.run(
        roundtrip(args.url, args.cluster_id, args.channel, args.count, args.expect_stored)
    )
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
