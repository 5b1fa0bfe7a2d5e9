"""What the node that takes the lease reads before it serves, and its patience with
JetStream meanwhile.

After the serving node's death, the streams it led elect new leaders (4-9 s each, side by
side, not tunable) and answer nothing until then. Each step of a promotion is asked
briefly and again (:class:`Patience`), not once for a whole request timeout: a new leader
does not answer a request sent before its election. A step that fails is asked again on
its own; what was read before it is not read again.

No message is read: each channel's figures (recorded by the serving node once a second)
are corrected by its last message as its stream's leader has it, its first in the
stream, and the few messages stored after the figures were recorded
(:func:`read_figures`, for each channel by ``channel_loads.py``). What subscriptions need
is read later, on demand (``paged_messages``): a promotion's time depends on the number
of channels, not on the messages stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from stanpkg.stores.base import StoreError, StoreLog
from stanpkg.stores.jetstream.channel_log import ChannelLog
from stanpkg.stores.jetstream.connection import raise_if_cancelled
from stanpkg.stores.jetstream.conversion import Conversion
from stanpkg.stores.jetstream.record_codec import ChannelState, ClusterRecords, decode_records
from stanpkg.stores.jetstream.records_map import ReplicatedMap
from stanpkg.stores.jetstream.replicated_messages import RestoredFigures
from stanpkg.stores.jetstream.shared_streams import SharedStreams, UnsupportedServer

__all__ = [
    "PROMOTION_TIMEOUT",
    "AddedChannels",
    "Patience",
    "convert_legacy",
    "ensure_streams",
    "read_added",
    "read_figures",
]

T = TypeVar("T")

PROMOTION_TIMEOUT = 60.0  # for one step of the promotion to succeed
LEADER_PROBE_TIMEOUT = 0.5  # the first wait for a stream's leader at promotion
LEADER_PROBE_RETRY = 0.1
# A new leader does not answer what was asked before its election: a step is asked again
# at least this often, so an election is noticed within it (longer only on a loaded host).
PROBE_CAP = 2.0


class Patience:
    """Runs a promotion's steps, each asked again while it fails (a stream electing its
    leader) for PROMOTION_TIMEOUT at most; the lease is renewed meanwhile.
    ``still_leading()``: false once the lease lapsed (another node serves: stop)."""

    def __init__(
        self, log: StoreLog, still_leading: Callable[[], bool], timeout: float | None = None
    ) -> None:
        self._log = log
        self._still_leading = still_leading
        self._timeout = PROMOTION_TIMEOUT if timeout is None else timeout
        self.deadline = asyncio.get_running_loop().time() + self._timeout
        # A stream electing is asked briefly and again; a loaded host gets longer each time.
        self.leader_timeout = LEADER_PROBE_TIMEOUT

    def restart(self) -> None:
        """A new step with a whole PROMOTION_TIMEOUT (each channel of a conversion)."""
        self.deadline = asyncio.get_running_loop().time() + self._timeout

    async def run(self, step: Callable[[float], Awaitable[T]], what: str = "waiting") -> T:
        """``step(leader_timeout)``'s result, asked again while it raises StoreError (the
        first failure is logged, with ``what``). StoreError when it is cancelled, the
        lease lapsed or the deadline passed; UnsupportedServer at once."""
        warned = False
        while True:
            try:
                return await step(self.leader_timeout)
            except UnsupportedServer:
                raise
            except StoreError as exc:
                self.check(exc)
                if not warned:  # once a step: several may wait for their elections
                    self._log.warn(f"Loading the cluster's state, {what}: {exc}")
                    warned = True
            self.leader_timeout = min(self.leader_timeout + LEADER_PROBE_TIMEOUT, PROBE_CAP)
            await asyncio.sleep(LEADER_PROBE_RETRY)

    def check(self, exc: StoreError) -> None:
        """Raise when a failed step must not be asked again: cancelled, lease lost, late."""
        raise_if_cancelled()
        if not self._still_leading():  # the lease lapsed meanwhile: another node leads
            raise StoreError(f"lost the cluster's lease while loading: {exc}") from exc
        if asyncio.get_running_loop().time() >= self.deadline:
            raise StoreError(f"unable to load the cluster's state: {exc}") from exc


async def ensure_streams(streams: SharedStreams, patience: Patience) -> None:
    """Every shared stream created, or checked, side by side: after a host's death they
    elect their leaders side by side, and each is asked again on its own until it has one,
    so the promotion waits for the last election, not for their sum."""

    async def one(index: int) -> None:
        async def ensure(timeout: float) -> None:
            await streams.ensure(index, timeout)

        await patience.run(ensure)

    tasks = [asyncio.ensure_future(one(index)) for index in range(streams.count)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()  # one failed (its deadline): the others stop too


async def convert_legacy(
    decoded: ClusterRecords, conversion: Conversion, patience: Patience, log: StoreLog
) -> None:
    """Convert the layout-1 channels of ``decoded`` (their records updated in place)."""
    legacy = decoded.legacy
    streams = conversion.streams
    log.notice(
        f"Converting {len(legacy)} channel(s) from a stream each to {streams.new} shared "
        "stream(s); the node serves once every channel is converted"
    )
    await patience.run(lambda timeout: conversion.move_overlapping(legacy, timeout), "converting")
    await ensure_streams(streams, patience)
    for channel in legacy:
        patience.restart()

        async def convert(timeout: float, channel: str = channel) -> tuple[int, ChannelState]:
            return await conversion.convert(channel, decoded.states.get(channel), timeout)

        index, figures = await patience.run(convert, "converting")
        decoded.channels[channel] = index
        decoded.states[channel] = figures
    patience.restart()
    await patience.run(lambda _timeout: conversion.finish(streams.new), "converting")
    log.notice(
        f"Converted {len(legacy)} channel(s) ({conversion.copied} message(s) copied) to "
        f"{streams.new} shared stream(s)"
    )


async def read_figures(
    log: ChannelLog, recorded: ChannelState, patience: Patience
) -> RestoredFigures:
    """What a channel holds (``log``: its log; ``recorded``: its figures as last
    recorded), without reading its messages: its last message as its stream's leader has
    it, its first in the stream, and the messages stored after its figures were last
    recorded, which are read. Asked again while its stream elects a leader."""

    async def step(_timeout: float) -> RestoredFigures:
        return await _figures_of(log, recorded)

    return await patience.run(step)


async def _figures_of(log: ChannelLog, recorded: ChannelState) -> RestoredFigures:
    last = await log.last_message()
    if last is None:  # every message gone: the channel goes on after the recorded last
        return RestoredFigures(0, 0, 0, recorded.last, None)
    log.start_at(last)
    # Where the stream's copy begins: the recorded first when the figures say messages
    # are kept (what the limits dropped before it is purged by the next purge below), else
    # asked (a channel without figures, or whose every message was dropped).
    stored_first = recorded.first if recorded.msgs else 0
    stored_first = stored_first or await log.first_stored() or last.sequence
    if recorded.last:
        # What the figures dropped may still be in the stream (purged lazily, after).
        kept_from = recorded.first if recorded.msgs else recorded.last + 1
        first = max(stored_first, kept_from)
        tail_from = max(recorded.last + 1, first)
        size = recorded.bytes if recorded.msgs else 0
    else:  # no figures recorded yet (a young channel): every message is the tail
        first = tail_from = stored_first
        size = 0
    tail = await log.read_messages(tail_from, last.sequence) if tail_from <= last.sequence else []
    size += sum(len(message.record) for message in tail)
    return RestoredFigures(
        first if first <= last.sequence else 0,
        size,
        tail[-1].timestamp if tail else 0,
        max(recorded.last, tail_from - 1),
        last,
        tail,
        [message.guid for message in tail],
        stored_first,
    )


@dataclass
class AddedChannels:
    """What :func:`read_added` found: the records and the added channels (name ->
    shared stream)."""

    records: ClusterRecords
    channels: dict[str, int]


async def read_added(
    state: ReplicatedMap,
    streams: SharedStreams,
    names: list[str],
    known: set[str],
    patience: Patience,
    log: StoreLog,
) -> AddedChannels:
    """While serving: the channels ``names`` that the records have and ``known`` has
    not (what ``stanpkg migrate`` added), read as a promotion reads them. StoreError when
    they cannot be read, or are in a shared stream the serving node does not use."""
    decoded = decode_records(await patience.run(state.load, "loading migrated channels"))
    if decoded is None:
        raise StoreError("the cluster's records hold no server info")
    wanted = set(names) - known
    channels = {name: index or 0 for name, index in decoded.channels.items() if name in wanted}
    beyond = sorted(name for name, index in channels.items() if index >= streams.count)
    if beyond:
        raise StoreError(
            f"channel(s) {', '.join(beyond)} are in a shared stream this node does not use: "
            "restart it to load them"
        )
    return AddedChannels(decoded, channels)
