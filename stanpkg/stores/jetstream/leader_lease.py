"""The cluster's lease: the one node that holds it serves (the reference's Raft leader).

A key in a replicated KV bucket holds the holder's node ID. The holder renews it every
quarter of the lease time with compare-and-set on its revision; a standby that sees the
revision unchanged for a whole lease time takes it over, also by compare-and-set, so at
most one contender wins. Time is measured only with each node's own monotonic clock:
no clock agreement between hosts is needed. A holder that could not renew for 0.8 of the
lease time gives up before any standby may take over.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from nats.errors import Error as NatsPyError
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.nats_link import JetStreamLink

__all__ = ["Lease"]

SELF_FENCE = 0.8  # of the lease time without a successful renewal


class Lease:
    def __init__(
        self,
        link: JetStreamLink,
        *,
        bucket: str,
        key: str,
        holder: str,
        ttl: float,
        replicas: int,
        on_lost: Callable[[str], None],
    ) -> None:
        self._link = link
        self._bucket = bucket
        self._key = key
        self.me = holder
        self.ttl = ttl
        self._replicas = replicas
        self._on_lost = on_lost
        self._kv: KeyValue | None = None
        self._revision = 0
        self.held = False
        self.holder = ""
        self._renewer: asyncio.Task[None] | None = None

    async def _bucket_kv(self) -> KeyValue:
        if self._kv is None:
            js = self._link.js
            try:
                self._kv = await js.key_value(self._bucket)
            except BucketNotFoundError:
                # Several nodes may create it at once: the same config is accepted twice.
                self._kv = await js.create_key_value(
                    bucket=self._bucket, history=1, replicas=self._replicas
                )
        return self._kv

    async def wait_until_held(self) -> None:
        loop = asyncio.get_running_loop()
        seen_revision, seen_since = -1, loop.time()
        while True:
            try:
                kv = await self._bucket_kv()
                try:
                    entry = await kv.get(self._key)
                    revision, holder = entry.revision or 0, (entry.value or b"").decode()
                except KeyNotFoundError:
                    revision, holder = 0, ""
                now = loop.time()
                if revision != seen_revision:
                    seen_revision, seen_since = revision, now
                self.holder = holder
                # Absent or released (first come wins), our own from before a restart, or
                # lapsed: try to take it.
                free = not holder or holder == self.me or now - seen_since >= self.ttl
                if free and await self._take(kv, revision):
                    break
            except (NatsPyError, TimeoutError):
                pass  # no quorum right now: keep watching
            await asyncio.sleep(self.ttl / 4)
        self.held = True
        self.holder = self.me
        self._renewer = asyncio.get_running_loop().create_task(self._renew())

    async def _take(self, kv: KeyValue, revision: int) -> bool:
        try:
            if revision:
                self._revision = await kv.update(self._key, self.me.encode(), last=revision)
            else:
                self._revision = await kv.create(self._key, self.me.encode())
        except KeyWrongLastSequenceError:
            return False  # another contender was first
        return True

    async def _renew(self) -> None:
        loop = asyncio.get_running_loop()
        kv = self._kv
        assert kv is not None
        renewed = loop.time()
        while self.held:
            await asyncio.sleep(self.ttl / 4)
            try:
                self._revision = await asyncio.wait_for(
                    kv.update(self._key, self.me.encode(), last=self._revision), self.ttl / 4
                )
                renewed = loop.time()
                continue
            except KeyWrongLastSequenceError:
                self._lose("another node took the lease over")
                return
            except (NatsPyError, TimeoutError):
                pass
            if loop.time() - renewed >= self.ttl * SELF_FENCE:
                self._lose(f"unable to renew it for {self.ttl * SELF_FENCE:.1f} s")
                return

    def _lose(self, reason: str) -> None:
        if self.held:
            self.held = False
            self._on_lost(reason)

    async def release(self) -> None:
        """On a graceful stop: a standby takes over at once instead of after ttl."""
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        if self.held and self._kv is not None:
            self.held = False
            with contextlib.suppress(NatsPyError, TimeoutError, StoreError):
                await self._kv.delete(self._key, last=self._revision)
