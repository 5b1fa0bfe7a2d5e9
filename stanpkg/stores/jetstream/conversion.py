"""Converting a cluster written in layout 1 (a stream per channel) to the shared streams.

The serving node does it at promotion, before it serves, when the records name channels
of layout 1 (an empty ``channel.<name>`` record). Channel by channel:

1. the messages of the channel's stream (``layout.legacy_stream_name``) are copied into
   its subject of a shared stream, each with its STAN sequence (the old stream's
   sequence), timestamp, reply and publish GUID (``Stan-Guid``: layout 1's own IDs were
   unique per channel only, so they are not given to JetStream's deduplication), by
   atomic batches fenced as every channel write is (``channel_log``);
2. the channel's figures are recorded (``state.<name>``), its last sequence among them:
   where the channel continues when none of its messages is left;
3. the old stream is deleted;
4. the channel's record takes the new form (``{"stream": k}``).

Each step is on a quorum before the next. A run that stops anywhere (a crash, a lost
lease) leaves a channel whose record is still of layout 1, and the next run converts it
again: the copy continues after the last STAN sequence its subject holds (never a message
twice, none skipped), and a missing old stream means it was deleted after its copy
(its figures are recorded). Subscriptions and durable positions are records of their own,
and their sequences do not change: they stay as they are. The ``layout`` record comes
last, once every channel is converted.

A layout-1 stream whose subject falls under a shared stream's (a channel named ``3.x``,
under ``_STAN.ch.<cluster>.3.>``) would keep JetStream from creating that shared stream:
such streams get another subject first (:meth:`Conversion.move_overlapping`); their
messages stay where they are.
"""

from __future__ import annotations

from collections.abc import Callable

from stanpkg.stores.base import StoreError, StoreLog
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.cluster_writer import ClusterWriter
from stanpkg.stores.jetstream.connection import (
    ASK_AGAIN_EVERY,
    STREAM_NOT_FOUND,
    JetStreamError,
    first_answer,
)
from stanpkg.stores.jetstream.layout import (
    legacy_moved_subject,
    legacy_overlaps,
    legacy_stream_name,
)
from stanpkg.stores.jetstream.record_codec import (
    HEADER_MSG_ID,
    HEADER_REPLY,
    HEADER_TIMESTAMP,
    ChannelState,
    channel_record,
    layout_record,
    state_record,
)
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.stream_management import delete_stream, move_stream_subjects
from stanpkg.stores.jetstream.stream_reader import StreamState, find_stream_state, read_range
from stanpkg.stores.jetstream.stream_writer import ATOMIC_BATCH_MAX
from stanpkg.transport.connection import decode_headers

__all__ = ["Conversion"]


class Conversion:
    """One promotion's conversion of layout-1 channels (their records and streams)."""

    def __init__(
        self,
        writer: ClusterWriter,
        records: ReplicatedMap,
        log: StoreLog,
        *,
        check: Callable[[], None],
    ) -> None:
        self._conn = writer.conn
        self._writer = writer
        self.streams = writer.streams
        self._records = records
        self._log = log
        self._check = check  # raises StoreError once this node may no longer write
        self.copied = 0  # messages copied by this run

    async def move_overlapping(self, channels: list[str], leader_timeout: float) -> None:
        """Give the layout-1 streams whose subject is a shared stream's another subject,
        before the shared streams are created."""
        cluster_id = self.streams.cluster_id
        for channel in channels:
            if not legacy_overlaps(channel, self.streams.count):
                continue
            name = legacy_stream_name(cluster_id, channel)
            if await self._old_state(name, leader_timeout) is None:
                continue
            self._check()
            await move_stream_subjects(
                self._conn, name, [legacy_moved_subject(cluster_id, channel)]
            )

    async def convert(
        self, channel: str, known: ChannelState | None, leader_timeout: float
    ) -> tuple[int, ChannelState]:
        """Convert one channel (again: whatever an earlier run did of it); its shared
        stream and figures. ``known``: its figures' record, if an earlier run wrote it."""
        streams = self.streams
        index = streams.index_of_new(channel)
        name = legacy_stream_name(streams.cluster_id, channel)
        old = await self._old_state(name, leader_timeout)
        target = self._writer.channel_log(channel, index)
        last = await target.last_message()
        target.start_at(last)
        copied = 0
        if old is not None and old.msgs:
            copied = await self._copy(name, old, target, last.sequence if last else 0)
        if old is not None:
            figures = ChannelState(old.msgs, 0, old.first_seq, old.last_seq)
        else:  # deleted by an earlier run, after its copy and its figures
            figures = known or ChannelState(0, 0, 0, last.sequence if last else 0)
        self._records.put(*state_record(channel, figures))
        await self._records.flush()
        if old is not None:
            self._check()
            await delete_stream(self._conn, name)
        self._records.put(*channel_record(channel, index))
        await self._records.flush()
        self.copied += copied
        self._log.notice(
            f"Converted channel {channel!r}: {copied} message(s) copied from stream {name} "
            f"into stream {streams.name(index)} (sequences {figures.first}..{figures.last})"
        )
        return index, figures

    async def finish(self, new_streams: int) -> None:
        """Every channel converted: the layout record, last."""
        self._records.put(*layout_record(new_streams, packs=self._writer.pack_bytes > 0))
        await self._records.flush()

    async def _old_state(self, name: str, leader_timeout: float) -> StreamState | None:
        """The layout-1 stream's state from its leader; None when it does not exist."""
        try:
            return await first_answer(
                lambda: find_stream_state(self._conn, name),
                timeout=leader_timeout,
                every=ASK_AGAIN_EVERY,
                woken_by=self._conn,
            )
        except TimeoutError:
            raise StoreError(f"JetStream did not answer for stream {name}") from None
        except JetStreamError as exc:
            if exc.err_code == STREAM_NOT_FOUND:
                return None
            raise

    async def _copy(self, name: str, old: StreamState, target: ChannelLog, after: int) -> int:
        """The old stream's messages past STAN sequence ``after`` into ``target``."""
        copied = 0
        start = max(old.first_seq, after + 1)
        async for sequence, headers, data in read_range(self._conn, name, start, old.last_seq):
            fields = decode_headers(headers)[1]
            target.append_write(
                (
                    sequence,
                    fields.get(HEADER_MSG_ID, ""),
                    fields.get(HEADER_REPLY, ""),
                    int(fields.get(HEADER_TIMESTAMP) or 0),
                    data,
                )
            )
            copied += 1
            if copied % ATOMIC_BATCH_MAX == 0:
                self._check()
                await target.flush()
        self._check()
        await target.flush()
        return copied
