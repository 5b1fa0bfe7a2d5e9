"""One migration: the source's channels into their shared streams (resuming where an
earlier run stopped), then the records, then ``--verify``; a summary of it all."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stanpkg.migrate.destination import Destination, DestinationError, Message, Step
from stanpkg.migrate.progress import Progress
from stanpkg.migrate.source_store import SourceChannel, SourceError, SourceStore
from stanpkg.migrate.verify import ChannelCheck, verify_channel
from stanpkg.stores.base import ServerInfo, StoreError
from stanpkg.stores.jetstream.record_codec import ChannelState

__all__ = ["MigrateError", "Request", "Summary", "migrate"]

CHUNK_MESSAGES = 10_000  # appended before one write (sent as atomic batches of 1,000)
CHUNK_BYTES = 8 * 1024 * 1024


class MigrateError(Exception):
    """The migration stopped (the text says where and why)."""


@dataclass(frozen=True)
class Request:
    cluster_id: str
    discover_prefix: str
    dry_run: bool = False
    verify: bool = False
    replace: bool = False
    parallel: int = 4  # channels written at once (one channel's batches go one at a time)


@dataclass
class Summary:
    source: str
    cluster_id: str
    replicas: int
    dry_run: bool
    channels: list[dict[str, Any]] = field(default_factory=list)
    clients: int = 0
    records: int = 0
    figures: dict[str, float | int] = field(default_factory=dict)
    skipped_records: list[str] = field(default_factory=list)
    handover: str = ""  # what the serving node did with the migrated channels
    handed_over: bool | None = None  # False: a serving node did not load them
    verify: list[ChannelCheck] | None = None

    @property
    def verified(self) -> bool:
        return self.verify is None or all(check.ok for check in self.verify)

    def as_dict(self) -> dict[str, Any]:
        document = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "verify"
        }
        document["verify"] = (
            None if self.verify is None else [check.as_dict() for check in self.verify]
        )
        document["verified"] = self.verified if self.verify is not None else None
        return document

    def text(self) -> str:
        f = self.figures
        verb = "would migrate" if self.dry_run else "migrated"
        lines = [
            f"{verb} {len(self.channels)} channel(s), {f.get('messages', 0):,} message(s) "
            f"({f.get('bytes', 0) / 1e6:,.1f} MB) in {f.get('seconds', 0):.1f} s "
            f"({f.get('msgs_per_s', 0):,.0f} msgs/s, {f.get('mb_per_s', 0):,.2f} MB/s), "
            f"{self.clients} client(s), {self.records} record(s); cluster "
            f"{self.cluster_id!r}, {self.replicas} replica(s)"
        ]
        for channel in self.channels:
            lines.append(
                f"  {channel['name']}: {channel['first_seq']}..{channel['last_seq']}, "
                f"{channel['action']}, {_moved(channel, self.dry_run)}, "
                f"{channel['subscriptions']} subscription(s)"
            )
        for record in self.skipped_records:
            lines.append(f"  skipped damaged record: {record}")
        if self.handover:
            lines.append(f"  hand-over: {self.handover}")
        for check in self.verify or ():
            state = "ok" if check.ok else "DIFFERENT"
            side = check.destination.as_dict()
            lines.append(
                f"  verify {check.name}: {state} ({side['messages']} messages, "
                f"{side['first_seq']}..{side['last_seq']}, sha256 {str(side['sha256'])[:16]})"
            )
            lines.extend(f"    {difference}" for difference in check.differences)
        return "\n".join(lines)


def _moved(channel: dict[str, Any], dry_run: bool) -> str:
    if dry_run:
        return f"{channel.get('to_write', 0):,} to write"
    return f"{channel['written']:,} written"


async def migrate(
    source: SourceStore,
    destination: Destination,
    request: Request,
    emit: Callable[[str], None],
    progress_options: dict[str, Any],
) -> Summary:
    """Migrate (or with ``dry_run`` only plan) every channel, then the records."""
    summary = Summary(
        source=source.description,
        cluster_id=request.cluster_id,
        replicas=destination.replicas,
        dry_run=request.dry_run,
    )
    total = sum(max(c.msg_count, 0) for c in source.channels)
    progress = Progress(emit, len(source.channels), total, **progress_options)
    gate = asyncio.Semaphore(max(1, request.parallel))

    async def one(channel: SourceChannel) -> dict[str, Any]:
        async with gate:
            return await _channel(source, destination, channel, request, progress)

    summary.channels = list(await asyncio.gather(*(one(c) for c in source.channels)))
    if not request.dry_run:
        existing = await destination.open_state()
        subs = {c.name: c.subscriptions for c in source.channels}
        figures = {
            c.name: ChannelState(c.msg_count, c.total_bytes, c.first_seq, c.last_seq)
            for c in source.channels
        }
        summary.records = await destination.write_records(
            existing, _server_info(source, request), source.clients, subs, figures
        )
        if summary.channels:
            summary.handed_over, summary.handover = await _hand_over(destination, summary)
    summary.clients = len(source.clients)
    summary.figures = progress.figures()
    summary.skipped_records = list(source.skipped)
    if request.verify:
        summary.verify = [await verify_channel(source, c, destination) for c in source.channels]
    return summary


async def _hand_over(destination: Destination, summary: Summary) -> tuple[bool, str]:
    """The serving node told to serve the migrated channels. A channel it already had
    (replaced with ``--replace``) it keeps as it has it, until a node takes over."""
    names = [channel["name"] for channel in summary.channels]
    served, text = await destination.hand_over(names)
    replaced = [c["name"] for c in summary.channels if c["action"] == "replace"]
    if served and replaced:
        text += (
            f"; a serving node keeps what it had of the replaced channel(s) "
            f"{', '.join(replaced)}: restart it to serve theirs"
        )
    if not served:
        text += ": restart the serving node, the next one loads them (docs/migrate.md)"
    return served, text


async def _channel(
    source: SourceStore,
    destination: Destination,
    channel: SourceChannel,
    request: Request,
    progress: Progress,
) -> dict[str, Any]:
    name = channel.name
    plan = await destination.plan_channel(name, channel.first_seq, channel.last_seq)
    if plan.step in (Step.RESUME, Step.DONE) and plan.stream is not None and plan.stream.msgs:
        for sequence in (plan.stream.first_seq, plan.stream.last_seq):
            if await _differs(source, destination, name, sequence):
                plan = dataclasses.replace(
                    plan,
                    step=Step.CONFLICT,
                    reason=f"its message {sequence} is not the source's",
                )
                break
    report: dict[str, Any] = {
        "name": name,
        "first_seq": channel.first_seq,
        "last_seq": channel.last_seq,
        "messages": channel.msg_count,
        "subscriptions": len(channel.subscriptions),
        "action": plan.step.value,
        "from_seq": plan.next_seq,
        "written": 0,
    }
    if plan.reason:
        report["reason"] = plan.reason
    if request.dry_run:
        if plan.step is Step.CONFLICT and request.replace:
            report["action"] = "replace"
        if plan.step is not Step.CONFLICT or request.replace:
            start = channel.first_seq if plan.step is Step.CONFLICT else plan.next_seq
            report["to_write"] = _read_through(source, name, start, progress)
        progress.channel_done()
        return report
    log = destination.channel_log(name)
    next_seq = await destination.prepare(
        log, plan, replace=request.replace, first_seq=channel.first_seq
    )
    if plan.step is Step.CONFLICT:
        report["action"] = "replace"
    report["from_seq"] = next_seq
    queued = size = 0
    try:
        for message in source.messages(name, next_seq):
            _check_next(name, next_seq, message.sequence)
            log.append(message.sequence, message.reply, message.timestamp, message.data)
            next_seq += 1
            queued += 1
            size += len(message.data)
            if queued >= CHUNK_MESSAGES or size >= CHUNK_BYTES:
                await log.flush()
                report["written"] += queued
                progress.add(queued, size)
                queued = size = 0
        await log.flush()
    except StoreError as exc:
        raise MigrateError(f"channel {name!r}: {exc}") from exc
    except SourceError as exc:
        raise MigrateError(str(exc)) from exc
    report["written"] += queued
    progress.add(queued, size)
    progress.channel_done()
    return report


def _read_through(source: SourceStore, name: str, next_seq: int, progress: Progress) -> int:
    """A dry run reads what it would write: damage and gaps show up before any write."""
    count = size = 0
    try:
        for message in source.messages(name, next_seq):
            _check_next(name, next_seq + count, message.sequence)
            count += 1
            size += len(message.data)
    except SourceError as exc:
        raise MigrateError(str(exc)) from exc
    progress.add(count, size)
    return count


def _check_next(channel: str, expected: int, found: int) -> None:
    if found != expected:
        raise MigrateError(
            f"channel {channel!r}: the source has no message {expected} (the next is "
            f"{found}); a cluster keeps a channel's sequences only without gaps"
        )


async def _differs(
    source: SourceStore, destination: Destination, channel: str, sequence: int
) -> bool:
    stored = await destination.stored_message(channel, sequence)
    found = next(source.messages(channel, sequence), None)
    if stored is None or found is None or found.sequence != sequence:
        return True
    return Message(found.sequence, found.reply, found.timestamp, found.data) != stored


def _server_info(source: SourceStore, request: Request) -> ServerInfo:
    """The source's subjects (clients connected before keep publishing on theirs) under
    the destination's cluster ID."""
    info = source.server_info
    if info is None:
        return ServerInfo.for_cluster(request.cluster_id, request.discover_prefix)
    if info.cluster_id == request.cluster_id:
        return info
    discovery = info.discovery
    if discovery == f"{request.discover_prefix}.{info.cluster_id}":
        discovery = f"{request.discover_prefix}.{request.cluster_id}"
    return dataclasses.replace(info, cluster_id=request.cluster_id, discovery=discovery)


__all__ += ["DestinationError"]
