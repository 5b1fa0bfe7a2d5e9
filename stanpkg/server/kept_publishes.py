"""Publishes that reach a serving node while it stops, kept for the node it hands the
service over to (a clustered node's graceful stop, ``stores/jetstream/handover.py``).

A STAN client does not resend a publish: one sent while nobody listens waits for its
PubAck until it times out (30 s by default), however quickly the next node serves. So
the stopping node does not drop its publish subscriptions: once what arrived before the
stop is in, they keep what comes (unanswered: nothing is stored or acknowledged from
then on). When the successor answers on the ping subject, it listens on the publish
subjects too (a server subscribes to both at once): the subscriptions go, and what was
kept is published again, in order, with the clients' own reply subjects, for it to
answer. What arrives between its subscribing and ours going reaches both nodes; the copy
sent again is stored once, by its publish ID. Such a publish can be stored after one sent
later that went to the successor alone: only a client with publishes in flight right
then sees them reordered (before, it lost them).

Without a successor (standalone, fault-tolerant, no peer running) the kept publishes are
dropped, as the stop's unsubscriptions did before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.errors import NatsError

__all__ = ["FORWARD_WITHIN", "KeptPublishes"]

FORWARD_WITHIN = 3.0  # seconds for the successor to listen (its promotion)
PROBE_EVERY = 0.02  # "no responders" comes back at once; short: see the reordering above
PROBE_TIMEOUT = 0.5
MAX_KEPT_BYTES = 64 * 1024 * 1024
# A ping no client sent: answered "gone" by a serving node, and only by one.
_PROBE = pb.Ping(connID=b"stanpkg-hand-over").SerializeToString()


class KeptPublishes:
    """The publish subscriptions ``sids`` of ``conn``, keeping what arrives."""

    def __init__(self, conn: NatsConnection, *, max_bytes: int = MAX_KEPT_BYTES) -> None:
        self._conn = conn
        self._sids: list[int] = []
        self._kept: list[tuple[str, str, bytes]] = []  # (subject, reply, data)
        self._bytes = 0
        self._max_bytes = max_bytes
        self.overflowed = 0

    def __contains__(self, sid: object) -> bool:
        return sid in self._sids

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, sids: Iterable[int]) -> None:
        """From now on what arrives on ``sids`` is kept, not handled."""
        for sid in sids:
            if self._conn.rehandle(sid, self._keep):
                self._sids.append(sid)

    def _keep(self, subject: str, reply: str, data: bytes) -> None:
        size = len(subject) + len(reply) + len(data)
        if self._bytes + size > self._max_bytes:
            self.overflowed += 1
            return
        self._bytes += size
        self._kept.append((subject, reply, data))

    def drop(self) -> None:
        for sid in self._sids:
            self._conn.unsubscribe(sid)
        self._sids.clear()
        self._kept.clear()

    async def forward(self, ping_subject: str, within: float = FORWARD_WITHIN) -> int | None:
        """Once a server answers on ``ping_subject``, stop keeping and publish what was
        kept to it; how many, once it has them all. None when nobody answered within
        ``within`` seconds (then they are dropped)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not await self._answered(ping_subject):
            if loop.time() >= deadline:
                self.drop()
                return None
            await asyncio.sleep(PROBE_EVERY)
        kept = self._kept
        self._kept = []
        self.drop()  # before the copies, on the same connection: we get none of them back
        for subject, reply, data in kept:
            self._conn.publish(subject, data, reply)
        # Answered after the copies, which went the same way: the successor has them.
        await self._answered(ping_subject)
        return len(kept)

    async def _answered(self, ping_subject: str) -> bool:
        try:
            await self._conn.request(ping_subject, _PROBE, PROBE_TIMEOUT)
        except (NatsError, TimeoutError):
            return False
        return True
