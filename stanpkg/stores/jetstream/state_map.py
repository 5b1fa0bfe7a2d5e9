"""The cluster's records (server info, clients, channels, subscriptions) as one KV bucket,
written in pipelined batches."""

from __future__ import annotations

import asyncio
import base64

from nats.errors import Error as NatsPyError
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.nats_link import JetStreamLink

__all__ = ["ReplicatedMap", "kv_key", "kv_key_parts"]

_DELETE = None
WRITE_BUDGET = 15.0  # seconds of retries while the bucket elects a new leader
RETRY_INTERVAL = 0.25


def kv_key(kind: str, *parts: str) -> str:
    """A valid KV key for any strings (client IDs and channel names may hold characters
    KV keys refuse): the kind, then each part base64url-encoded behind a marker."""
    encoded = ["k" + base64.urlsafe_b64encode(part.encode()).decode().rstrip("=") for part in parts]
    return ".".join([kind, *encoded])


def kv_key_parts(key: str) -> list[str]:
    """The inverse of :func:`kv_key`: [kind, part, ...]."""
    kind, *encoded = key.split(".")
    parts = []
    for item in encoded:
        raw = item[1:]
        parts.append(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode())
    return [kind, *parts]


class ReplicatedMap:
    def __init__(self, kv: KeyValue, bucket: str) -> None:
        self._kv = kv
        self.bucket = bucket
        self._queued: dict[str, bytes | None] = {}

    @classmethod
    async def open(cls, link: JetStreamLink, bucket: str, *, replicas: int) -> ReplicatedMap:
        try:
            try:
                kv = await link.js.key_value(bucket)
            except BucketNotFoundError:
                kv = await link.js.create_key_value(bucket=bucket, history=1, replicas=replicas)
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to open the cluster state {bucket!r}: {exc}") from exc
        return cls(kv, bucket)

    async def load(self) -> dict[str, bytes]:
        """Every live key and its value (one watch over the bucket, not key by key)."""
        found: dict[str, bytes] = {}
        try:
            watcher = await self._kv.watchall(ignore_deletes=True)
            async for entry in watcher:
                if entry is None:
                    break  # the initial values are all in
                if entry.value is not None and entry.operation is None:
                    found[entry.key] = entry.value
            await watcher.stop()  # type: ignore[no-untyped-call]
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to read the cluster state: {exc}") from exc
        return found

    def put(self, key: str, value: bytes) -> None:
        self._queued[key] = value

    def delete(self, key: str) -> None:
        self._queued[key] = _DELETE

    async def flush(self, budget: float = WRITE_BUDGET) -> None:
        """Write everything queued at once (concurrent requests, one ack each), retrying
        what failed while the bucket elects a leader (after a node died), for ``budget``
        seconds at most; then StoreError, the failed records kept for the next flush."""
        if not self._queued:
            return
        batch, self._queued = self._queued, {}
        kv = self._kv

        async def write(key: str, value: bytes | None) -> None:
            if value is None:
                await kv.delete(key)
            else:
                await kv.put(key, value)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while True:
            items = list(batch.items())
            results = await asyncio.gather(
                *(write(key, value) for key, value in items), return_exceptions=True
            )
            failed = {
                key: value
                for (key, value), result in zip(items, results, strict=True)
                if isinstance(result, BaseException)
            }
            if not failed:
                return
            if loop.time() >= deadline:
                for key, value in failed.items():  # kept for the next flush
                    self._queued.setdefault(key, value)
                first = next(r for r in results if isinstance(r, BaseException))
                raise StoreError(f"unable to replicate {len(failed)} record(s): {first}")
            await asyncio.sleep(RETRY_INTERVAL)
            # A key written again meanwhile goes out with its newer value, not this one.
            batch = {key: value for key, value in failed.items() if key not in self._queued}
            if not batch:
                return
