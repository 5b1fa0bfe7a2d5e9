"""The cluster's records (server info, clients, subscriptions) in one replicated KV bucket,
written in pipelined batches: every write of a batch in flight at once, one ack each.

KV keys allow only ``[-/_=.a-zA-Z0-9]`` while client IDs and channel names may hold any
character: :func:`kv_key` encodes the parts of a key reversibly.
"""

from __future__ import annotations

import asyncio
import base64
import re

from nats.errors import ConnectionClosedError
from nats.errors import Error as NatsPyError
from nats.js.kv import KeyValue

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.link import JetStreamLink, Write, first_answer

__all__ = ["ReplicaBehind", "ReplicatedMap", "kv_key", "kv_key_parts"]

WRITE_TIMEOUT = 5.0  # for the acks of one round of writes
WRITE_BUDGET = 10.0  # seconds of retries while the bucket elects a new leader
RETRY_INTERVAL = 0.25
PROBE_EVERY = 0.25  # load(): the leader is asked again this often while it does not answer
_DELETE_HEADERS = {"KV-Operation": "DEL"}
_PLAIN = re.compile(r"[a-zA-Z0-9][-_a-zA-Z0-9]*")  # kept as is, for readable keys
_VALID_KEY = re.compile(r"[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*")
_ENCODED = "="  # marks a base64url part; never the first character of a plain part


class ReplicaBehind(StoreError):
    """The replica read has not yet applied everything its leader has: reading again
    shortly succeeds."""


def kv_key(*parts: str) -> str:
    """A valid KV key for any strings: plain parts as they are, the others (and empty
    ones) as ``=`` + base64url, joined by '.'."""
    if not parts:
        raise ValueError("a KV key needs at least one part")
    return ".".join(part if _PLAIN.fullmatch(part) else _encode(part) for part in parts)


def kv_key_parts(key: str) -> tuple[str, ...]:
    """The inverse of :func:`kv_key`."""
    return tuple(
        _decode(token) if token.startswith(_ENCODED) else token for token in key.split(".")
    )


def _checked(key: str) -> str:
    """Keys become subjects: a bad one would write elsewhere or fail the whole batch."""
    if not _VALID_KEY.fullmatch(key):
        raise ValueError(f"invalid KV key {key!r} (make keys with kv_key)")
    return key


def _encode(part: str) -> str:
    return _ENCODED + base64.urlsafe_b64encode(part.encode()).decode().rstrip("=")


def _decode(token: str) -> str:
    raw = token[len(_ENCODED) :]
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()


class ReplicatedMap:
    """A KV bucket read whole at start-up, then written through :meth:`put` /
    :meth:`delete` (queued; the last write of a key wins) and :meth:`flush`."""

    def __init__(self, link: JetStreamLink, kv: KeyValue, bucket: str) -> None:
        self._link = link
        self._kv = kv
        self.bucket = bucket
        self._queued: dict[str, bytes | None] = {}  # None: delete

    @classmethod
    async def open(cls, link: JetStreamLink, bucket: str, *, replicas: int) -> ReplicatedMap:
        """The bucket, created (history 1) if missing."""
        try:
            kv = await link.key_value(bucket, replicas=replicas)
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to open the cluster state {bucket!r}: {exc}") from exc
        return cls(link, kv, bucket)

    async def load(self, leader_timeout: float = 5.0) -> dict[str, bytes]:
        """Every live key and its value, from one ordered consumer over the bucket (the
        last value of each key), not key by key. The consumer may sit on a replica that
        is behind (a node that just rejoined): StoreError unless what it delivered
        reaches the bucket's last sequence as its stream leader reports it, and when the
        bucket's stream has no leader that answers within ``leader_timeout``."""
        found: dict[str, bytes] = {}
        newest = 0
        try:
            name = f"KV_{self.bucket}"
            info = await first_answer(
                lambda: self._link.js.stream_info(name), timeout=leader_timeout, every=PROBE_EVERY
            )
            watcher = await self._kv.watchall()
            try:
                async for entry in watcher:
                    if entry is None:
                        break  # the marker after the last initial value
                    newest = max(newest, entry.revision or 0)
                    if entry.operation is None and entry.value is not None:
                        found[entry.key] = entry.value
            finally:
                await watcher.stop()  # type: ignore[no-untyped-call]
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to read the cluster state {self.bucket!r}: {exc}") from exc
        if newest < info.state.last_seq:
            raise ReplicaBehind(
                f"the cluster state {self.bucket!r} read here ends at {newest}, its leader "
                f"has {info.state.last_seq}: this replica is catching up"
            )
        return found

    def put(self, key: str, value: bytes) -> None:
        self._queued[_checked(key)] = value

    def delete(self, key: str) -> None:
        self._queued[_checked(key)] = None

    @property
    def queued(self) -> int:
        return len(self._queued)

    async def flush(self, budget: float = WRITE_BUDGET) -> None:
        """Write everything queued, every write in flight at once, and wait for every
        ack. What failed is retried for ``budget`` seconds (a bucket whose leader died
        elects a new one); then StoreError, the failed writes kept for the next flush."""
        if not self._queued:
            return
        batch, self._queued = self._queued, {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while True:
            items = list(batch.items())
            results = await self._link.publish_all(
                [self._write(key, value) for key, value in items], timeout=WRITE_TIMEOUT
            )
            failed = {
                key: value
                for (key, value), result in zip(items, results, strict=True)
                if isinstance(result, Exception)
            }
            if not failed:
                return
            first = next(r for r in results if isinstance(r, Exception))
            closed = isinstance(first, ConnectionClosedError) or self._link.nc.is_closed
            if closed or loop.time() >= deadline:
                for key, value in failed.items():  # a newer write of the key wins
                    self._queued.setdefault(key, value)
                raise StoreError(self._failure(len(failed), first, closed))
            await asyncio.sleep(RETRY_INTERVAL)
            # A key written again meanwhile goes out with its newer value at the next flush.
            batch = {key: value for key, value in failed.items() if key not in self._queued}
            if not batch:
                return

    def _write(self, key: str, value: bytes | None) -> Write:
        subject = f"$KV.{self.bucket}.{key}"
        return (subject, b"", _DELETE_HEADERS) if value is None else (subject, value, None)

    def _failure(self, count: int, first: BaseException, closed: bool) -> str:
        if closed:
            return (
                f"unable to replicate {count} record(s) to {self.bucket!r}: "
                f"the connection to JetStream at {self._link.url} is closed"
            )
        return f"unable to replicate {count} record(s) to {self.bucket!r}: {first!r}"
