"""Partitioning: each server of a cluster ID serves only its configured channels, and
servers exchange their channel lists to refuse overlaps (internal-protocol.md §4)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from stanpkg.plan.subjects import SubjectTree
from stanpkg.proto import spb_pb2 as spb
from stanpkg.server.errors import StartupError

if TYPE_CHECKING:
    from stanpkg.transport.connection import NatsConnection

__all__ = ["Partitions", "decode_channel_list", "encode_channel_lists"]

PREFIX = "_STAN.part"
REPLY_WAIT = 1.0  # the exchange ends when no reply came for this long
TOPOLOGY_DELAY = 0.5  # wait after new NATS servers appear before exchanging again
_PARTITIONING = spb.CtrlMsg.Partitioning


def encode_channel_lists(names: Iterable[str], server_id: str, max_payload: int) -> list[bytes]:
    """CtrlMsgs carrying the names (2-byte little-endian length + bytes each), split so
    that every message fits in ``max_payload``."""
    header = len(spb.CtrlMsg(MsgType=_PARTITIONING, ServerID=server_id).SerializeToString())
    budget = max_payload - (header + 9)  # the reference's reservation for the Data field
    chunks: list[bytearray] = [bytearray()]
    for name in names:
        raw = name.encode()
        entry = struct.pack("<H", len(raw)) + raw
        if len(entry) > budget:
            raise StartupError("message payload too small to send channels list")
        if len(chunks[-1]) + len(entry) > budget:
            chunks.append(bytearray())
        chunks[-1] += entry
    return [
        spb.CtrlMsg(
            MsgType=_PARTITIONING, ServerID=server_id, Data=bytes(chunk)
        ).SerializeToString()
        for chunk in chunks
    ]


def decode_channel_list(data: bytes) -> Iterator[str]:
    pos = 0
    while pos + 2 <= len(data):
        (size,) = struct.unpack_from("<H", data, pos)
        pos += 2
        yield data[pos : pos + size].decode("utf-8", "replace")
        pos += size


class Partitions:
    def __init__(
        self,
        channels: Iterable[str],
        *,
        cluster_id: str,
        server_id: str,
        conn: NatsConnection,
        fatal: Callable[[str], None],
    ) -> None:
        self.server_id = server_id
        self.conn = conn
        self.fatal = fatal  # a conflict found after startup stops the server
        self.names = list(channels)
        self.tree: SubjectTree[str] = SubjectTree()
        for name in self.names:
            self.tree.insert(name, name)
        self.subject = f"{PREFIX}.{cluster_id}"
        self._sid: int | None = None
        self._recheck: asyncio.Task[None] | None = None

    def handles(self, channel: str) -> bool:
        return self.tree.lookup_narrowest(channel) is not None

    def conflict_with(self, names: list[str]) -> str:
        """The first of ``names`` overlapping ours, or one of ours overlapping them."""
        for name in names:
            if self.tree.match_list(name):
                return name
        theirs: SubjectTree[str] = SubjectTree()
        for name in names:
            theirs.insert(name, name)
        for name in self.names:
            if theirs.match_list(name):
                return name
        return ""

    def listen(self) -> None:
        self._sid = self.conn.subscribe(self.subject, self._on_request)

    def stop(self) -> None:
        if self._sid is not None:
            self.conn.unsubscribe(self._sid)
            self._sid = None
        if self._recheck is not None:
            self._recheck.cancel()

    def on_topology_change(self) -> None:
        """NATS servers joined the cluster: servers we could not see before may serve our
        channels, so exchange the lists again (internal-protocol.md §4.3)."""
        if self._sid is not None and (self._recheck is None or self._recheck.done()):
            self._recheck = asyncio.get_running_loop().create_task(self._exchange_again())

    async def _exchange_again(self) -> None:
        await asyncio.sleep(TOPOLOGY_DELAY)
        try:
            await self.exchange()
        except StartupError as exc:
            self.fatal(f"Partitioning error: {exc}")

    def _on_request(self, subject: str, reply: str, payload: bytes) -> None:
        if not payload or not reply:
            return
        try:
            req = spb.CtrlMsg.FromString(payload)
        except DecodeError:
            return
        if req.ServerID == self.server_id:
            return
        conflict = self.conflict_with(list(decode_channel_list(req.Data)))
        resp = spb.CtrlMsg(MsgType=_PARTITIONING, ServerID=self.server_id, Data=conflict.encode())
        self.conn.publish(reply, resp.SerializeToString())

    async def exchange(self) -> None:
        """Send our list; any server that reports an overlap makes startup fail."""
        conn = self.conn
        replies: list[bytes] = []
        got_reply = asyncio.Event()

        def on_reply(_subject: str, _reply: str, payload: bytes) -> None:
            replies.append(payload)
            got_reply.set()

        inbox = conn.new_inbox()
        sid = conn.subscribe(inbox, on_reply)
        try:
            for request in encode_channel_lists(self.names, self.server_id, conn.max_payload):
                conn.publish(self.subject, request, reply=inbox)
            await conn.flush()
            while True:
                got_reply.clear()
                try:
                    await asyncio.wait_for(got_reply.wait(), REPLY_WAIT)
                except TimeoutError:
                    break
        finally:
            conn.unsubscribe(sid)
        for payload in replies:
            try:
                resp = spb.CtrlMsg.FromString(payload)
            except DecodeError as exc:
                raise StartupError(f"unable to decode partitioning response: {exc}") from None
            if resp.Data:
                name = resp.Data.decode("utf-8", "replace")
                raise StartupError(
                    f'channel "{name}" causes conflict with channels on server "{resp.ServerID}"'
                )
