"""Which server of a fault-tolerant group (``ft_group``) is active: the election the
fault-tolerant mode (``fault_tolerant.py``) waits on (internal-protocol.md §3).

Servers of one FT group share a FILE directory or SQL database; the one holding the
store's exclusive lock is active, the others stand by. The active one publishes a
heartbeat on ``_STAN.ft.<cluster_id>.<ft_group>``; a standby that hears nothing for the
missed interval tries to take the lock and, once it has it, recovers the store and
serves. Every server of the group must see the same heartbeats, so they must share the
NATS cluster too.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import FT_STORES_ONLY, LOCKABLE, StoreError

if TYPE_CHECKING:
    from stanpkg.server.log import Logger
    from stanpkg.stores.base import Store
    from stanpkg.transport.connection import NatsConnection

__all__ = [
    "HEARTBEAT_INTERVAL",
    "MISSED_INTERVAL",
    "FtElection",
    "decode_go_time",
    "encode_go_time",
    "ft_subject",
]

HEARTBEAT_INTERVAL = 1.0
MISSED_INTERVAL = 1.25
JITTER = 0.10  # each interval is chosen once per process within ±10 %
LOCK_LOG_BACKOFF_FIRST = 1.0
LOCK_LOG_BACKOFF_MAX = 60.0
_UNIX_TO_GO_SECONDS = 62_135_596_800  # seconds from 0001-01-01 to 1970-01-01 (UTC)


def ft_subject(cluster_id: str, group: str) -> str:
    """The configured cluster ID, not the stored one (a standby has not read the store)."""
    return f"_STAN.ft.{cluster_id}.{group}"


# Go's time.Time.MarshalBinary, which is what a Go peer sends and decodes: no library
# speaks it, and it is 15 fixed bytes.
def encode_go_time(unix_ns: int, utc_offset_seconds: int) -> bytes:
    """Version 1: seconds since year 1, nanoseconds, zone offset in minutes (the local
    zone, as the Go server uses local time)."""
    seconds, nanos = divmod(unix_ns, 1_000_000_000)
    return struct.pack(
        ">BqiH", 1, seconds + _UNIX_TO_GO_SECONDS, nanos, (utc_offset_seconds // 60) & 0xFFFF
    )


def decode_go_time(data: bytes) -> int:
    """Unix nanoseconds of a version 1 or 2 encoding; ValueError otherwise."""
    if len(data) not in (15, 16) or data[0] not in (1, 2) or (data[0] == 2) != (len(data) == 16):
        raise ValueError(f"invalid activation time encoding ({len(data)} bytes)")
    seconds: int
    nanos: int
    _, seconds, nanos, _ = struct.unpack_from(">BqiH", data)
    if not 0 <= nanos < 1_000_000_000:
        raise ValueError("invalid activation time nanoseconds")
    return (seconds - _UNIX_TO_GO_SECONDS) * 1_000_000_000 + nanos


def _jittered(interval: float) -> float:
    return interval * (1 + random.uniform(-JITTER, JITTER))


class FtElection:
    """Stand by until the store lock is ours, then heartbeat and watch for a rival."""

    def __init__(
        self,
        *,
        subject: str,
        server_id: str,
        store: Store,
        log: Logger,
        on_fatal: Callable[[str], None],
        heartbeat_interval: float = HEARTBEAT_INTERVAL,
        missed_interval: float = MISSED_INTERVAL,
    ) -> None:
        self.subject = subject
        self.server_id = server_id
        self.store = store
        self.log = log
        self.on_fatal = on_fatal
        self.heartbeat_interval = _jittered(heartbeat_interval)
        self.missed_interval = _jittered(missed_interval)
        self.active = False
        self.activation_ns = 0
        self._heard = asyncio.Event()
        self._sid: int | None = None
        self._conn: NatsConnection | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    def listen(self, conn: NatsConnection) -> None:
        self._conn = conn
        self._sid = conn.subscribe(self.subject, self._on_message)

    async def wait_until_active(self, lost: Callable[[str], None]) -> None:
        """Returns once this server holds the store lock (``lost`` is called if a store
        loses it later); standby until then. Raises StoreError on a fatal lock error."""
        next_log, backoff = 0.0, LOCK_LOG_BACKOFF_FIRST
        while True:
            # Any message on the subject restarts the wait (internal-protocol.md §3.2).
            while True:
                self._heard.clear()
                try:
                    await asyncio.wait_for(self._heard.wait(), self.missed_interval)
                except TimeoutError:
                    break
            lockable = self.store.capability(LOCKABLE)
            try:
                if lockable is None:
                    raise StoreError(FT_STORES_ONLY)
                if await lockable.acquire_exclusive_lock(lost):
                    break
            except StoreError as exc:
                self.log.error(f"ft: error attempting to get the store lock: {exc}")
                continue
            now = time.monotonic()
            if now >= next_log:
                self.log.notice("ft: unable to get store lock at this time, going back to standby")
                next_log, backoff = now + backoff, min(backoff * 2, LOCK_LOG_BACKOFF_MAX)
        self.active = True
        self.activation_ns = time.time_ns()

    def start_heartbeats(self, publish: Callable[[str, bytes], None]) -> None:
        """Heartbeat from now on; the payload is built once (the reference re-sends the
        same bytes)."""
        offset = time.localtime().tm_gmtoff
        payload = spb.CtrlMsg(
            MsgType=spb.CtrlMsg.FTHeartbeat,
            ServerID=self.server_id,
            Data=encode_go_time(self.activation_ns, offset),
        ).SerializeToString()
        self._heartbeat = asyncio.get_running_loop().create_task(
            self._beat(lambda: publish(self.subject, payload))
        )

    async def _beat(self, send: Callable[[], None]) -> None:
        while True:
            with contextlib.suppress(Exception):  # a NATS outage: the next beat retries
                send()
            await asyncio.sleep(self.heartbeat_interval)

    def _on_message(self, subject: str, reply: str, data: bytes) -> None:
        if not self.active:
            self._heard.set()
            return
        try:
            msg = spb.CtrlMsg.FromString(data)
        except DecodeError:
            return
        if msg.ServerID == self.server_id:
            return
        try:
            rival_ns = decode_go_time(msg.Data)
        except ValueError:
            rival_ns = None
        # The one activated first keeps serving: the other one aborts.
        if rival_ns is not None and rival_ns < self.activation_ns:
            self.on_fatal(f'ft: serverID "{msg.ServerID}" claims to be active, aborting')
        else:
            self.log.error(f'ft: serverID "{msg.ServerID}" claims to be active')

    async def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        if self._conn is not None and self._sid is not None and not self._conn.is_closed:
            self._conn.unsubscribe(self._sid)
        self._sid = None
