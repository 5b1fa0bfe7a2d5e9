"""One STAN channel = one JetStream stream; STAN sequence = stream sequence.

Names: stream ``STAN_<cluster>_<channel>_<hash>`` (invalid characters replaced, the hash
of the exact cluster ID and channel keeps them apart), subject
``_STAN.ch.<cluster>.<channel>``. The stream message's data is the published payload, so a
plain JetStream consumer of that subject reads the channel as it was published; STAN's
own fields travel in headers (``Stan-Reply``, ``Stan-Timestamp``).

Every write carries ``Nats-Expected-Last-Sequence``: JetStream stores it only right after
the sequence the leader expects, so writes cannot be reordered, and a node that lost the
lease without knowing it cannot append (fencing).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator

from nats.errors import Error as NatsPyError
from nats.js import api
from nats.js.errors import BadRequestError, NotFoundError

from stanpkg.plan.limits import Limits
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.jetstream.link import JetStreamLink, PublishFailed

__all__ = [
    "ChannelStream",
    "StreamFenced",
    "stream_name",
    "stream_subject",
]

WRONG_LAST_SEQUENCE = 10071  # JetStream's err_code for a failed expected-last-sequence
DUPLICATE_WINDOW = 120.0  # seconds
WRITE_BUDGET = 15.0  # seconds of retries while a stream elects a new leader
RETRY_INTERVAL = 0.25
ATTEMPT_TIMEOUT = 5.0  # for the answers of one round of writes
HEADER_REPLY = "Stan-Reply"
HEADER_TIMESTAMP = "Stan-Timestamp"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class StreamFenced(StoreError):
    """JetStream refused a write at the sequence this node expected: another node wrote
    to the channel (this one lost the lease) or a write went missing."""


def _token(text: str, limit: int) -> str:
    return _UNSAFE.sub("_", text)[:limit] or "_"


def stream_name(cluster_id: str, channel: str) -> str:
    digest = hashlib.sha256(f"{cluster_id}\0{channel}".encode()).hexdigest()[:10]
    return f"STAN_{_token(cluster_id, 40)}_{_token(channel, 120)}_{digest}"


def stream_subject(cluster_id: str, channel: str) -> str:
    return f"_STAN.ch.{_token(cluster_id, 200)}.{channel}"


def _unlimited(value: int) -> int:
    return value if value > 0 else -1


class ChannelStream:
    """Writing and reading one channel's stream."""

    def __init__(
        self, link: JetStreamLink, cluster_id: str, channel: str, limits: Limits, replicas: int
    ) -> None:
        self._link = link
        self.channel = channel
        self.name = stream_name(cluster_id, channel)
        self.subject = stream_subject(cluster_id, channel)
        self._limits = limits
        self._replicas = replicas
        self.last_sequence = 0  # the stream's, as this node knows it
        self.writer_id = ""  # unique per leadership: set by the store at promotion
        self._queued: list[tuple[int, bytes, dict[str, str]]] = []

    def config(self) -> api.StreamConfig:
        limits = self._limits
        max_age = limits.max_age / 1e9 if limits.max_age > 0 else 0.0
        window = min(DUPLICATE_WINDOW, max_age) if max_age else DUPLICATE_WINDOW
        return api.StreamConfig(
            name=self.name,
            description=f"STAN channel {self.channel}",
            subjects=[self.subject],
            storage=api.StorageType.FILE,
            discard=api.DiscardPolicy.OLD,
            max_msgs=_unlimited(limits.max_msgs),
            max_bytes=_unlimited(limits.max_bytes),
            max_age=max_age,
            num_replicas=self._replicas,
            duplicate_window=window,
            allow_direct=True,
        )

    async def ensure(self) -> tuple[int, int]:
        """Create the stream (or bring its limits up to date); its (first, last)."""
        js = self._link.js
        config = self.config()
        try:
            try:
                info = await js.add_stream(config)
            except BadRequestError:
                info = await js.update_stream(config)  # exists with other limits
        except (NatsPyError, TimeoutError) as exc:
            message = f"unable to create the stream of channel {self.channel!r}: {exc}"
            raise StoreError(message) from exc
        state = info.state
        self.last_sequence = state.last_seq
        return state.first_seq, state.last_seq

    async def delete(self) -> None:
        try:
            await self._link.js.delete_stream(self.name)
        except NotFoundError:
            pass
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to delete the stream of {self.channel!r}: {exc}") from exc

    # -- writing ---------------------------------------------------------------------------

    def append(
        self, sequence: int, reply: str, timestamp: int, payload: bytes, guid: str = ""
    ) -> None:
        headers = {
            # The publisher's message ID: a resend of the same write (after a lost reply)
            # is recognised by JetStream as a duplicate instead of stored twice.
            "Nats-Msg-Id": guid or f"{self.writer_id}:{sequence}",
            "Nats-Expected-Last-Sequence": str(sequence - 1),
            HEADER_TIMESTAMP: str(timestamp),
        }
        if reply:
            headers[HEADER_REPLY] = reply
        self._queued.append((sequence, payload, headers))

    def discard(self) -> None:
        self._queued.clear()

    async def flush(self, budget: float = WRITE_BUDGET) -> None:
        """Every queued write on a quorum, in order. While the stream has no leader (an
        election after a node died) the writes are retried, for ``budget`` seconds at
        most; then StoreError, and nothing of the batch counts as written."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        batch, self._queued = self._queued, []
        link, subject = self._link, self.subject
        while batch:
            results = await link.publish_all(
                [(subject, data, headers) for _, data, headers in batch], timeout=ATTEMPT_TIMEOUT
            )
            done = 0
            failure: BaseException | None = None
            for (sequence, _, _), result in zip(batch, results, strict=True):
                if isinstance(result, BaseException):
                    failure = result
                    break
                if result != sequence:
                    raise StreamFenced(f"stream {self.name} stored {sequence} as {result}")
                done += 1
            if done:
                self.last_sequence = batch[done - 1][0]
                batch = batch[done:]
            if failure is None:
                break
            if isinstance(failure, PublishFailed) and failure.err_code == WRONG_LAST_SEQUENCE:
                last = await self.stream_last()
                if last != batch[0][0] - 1:
                    raise StreamFenced(
                        f"stream {self.name} is at {last}, this node expected "
                        f"{batch[0][0] - 1}: {failure}"
                    )
                # A reply was lost but a later write came in order: just resend.
            elif loop.time() >= deadline:
                raise StoreError(f"unable to store sequence {batch[0][0]}: {failure}")
            else:
                await asyncio.sleep(RETRY_INTERVAL)

    async def stream_last(self) -> int:
        try:
            info = await self._link.js.stream_info(self.name)
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to read the state of {self.name}: {exc}") from exc
        return int(info.state.last_seq)

    # -- reading ---------------------------------------------------------------------------

    async def read(self, first: int, last: int) -> AsyncIterator[tuple[bytes, str]]:
        """The MsgProto records of sequences first..last still in the stream, each with
        its publish ID (an ordered consumer: one flow, not a request per message)."""
        if last < first or last == 0:
            return
        js = self._link.js
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(first, 1)
        )
        try:
            sub = await js.subscribe(self.subject, ordered_consumer=True, config=config)
        except (NatsPyError, TimeoutError) as exc:
            raise StoreError(f"unable to read channel {self.channel!r}: {exc}") from exc
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=5.0)
                except (NatsPyError, TimeoutError) as exc:
                    raise StoreError(f"unable to read channel {self.channel!r}: {exc}") from exc
                sequence = msg.metadata.sequence.stream
                if sequence > last:
                    break
                headers = msg.headers or {}
                record = pb.MsgProto(
                    sequence=sequence,
                    subject=self.channel,
                    reply=headers.get(HEADER_REPLY, ""),
                    data=msg.data,
                    timestamp=int(headers.get(HEADER_TIMESTAMP, "0")),
                ).SerializeToString()
                yield record, headers.get("Nats-Msg-Id", "")
                if sequence >= last:
                    break
        finally:
            await sub.unsubscribe()
