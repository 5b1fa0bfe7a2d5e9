"""What writes a cluster's channels into JetStream, for the serving node, its conversion
of an old layout and ``stanpkg migrate`` alike: the shared streams laid out as the
records say, one batch writer every channel log writes through, and the writer ID that
tells one writer's messages from another's (``channel_log.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.record_codec import PACK_BYTES
from stanpkg.stores.jetstream.shared_streams import SharedStreams
from stanpkg.stores.jetstream.stream_writer import BatchWriter
from stanpkg.transport.connection import NatsConnection

__all__ = ["ClusterWriter"]


class ClusterWriter:
    """Writes one cluster's channels: ``recorded`` are the shared streams the records
    put channels in (a channel never moves, so they all exist), ``new_streams`` how many
    new channels are spread over, ``pack_bytes`` the size of the packs written."""

    def __init__(
        self,
        conn: NatsConnection,
        cluster_id: str,
        replicas: int,
        *,
        recorded: Iterable[int],
        new_streams: int,
        writer_id: str,
        pack_bytes: int = PACK_BYTES,
    ) -> None:
        count = max([new_streams, *(index + 1 for index in recorded)])
        self.conn = conn
        self.cluster_id = cluster_id
        self.streams = SharedStreams(conn, cluster_id, replicas, count, new=new_streams)
        self.batches = BatchWriter(conn)
        self.writer_id = writer_id
        self.pack_bytes = pack_bytes

    def channel_log(self, channel: str, index: int, *, writer_id: str = "") -> ChannelLog:
        """The log of ``channel`` in shared stream ``index``, writing as ``writer_id``
        (this writer's when empty)."""
        log = ChannelLog(self.conn, self.batches, self.cluster_id, channel, index, self.pack_bytes)
        log.writer_id = writer_id or self.writer_id
        return log
