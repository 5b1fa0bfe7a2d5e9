"""Read API over a whole FILE datastore, shared by the server's recovery and the pipeline.

``open_datastore`` recovers like the reference (spec/filestore.md §10) but, unless asked
to repair/truncate, never writes: index rebuilds stay in memory, zero tails are only
skipped, the truncate witness is left alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.crypto import master_key_hash
from stanpkg.stores.filestore.clientsfile import CLIENTS_FILE, ClientRecord, replay_clients
from stanpkg.stores.filestore.errors import BadRecordHandler, FileStoreError
from stanpkg.stores.filestore.framing import IEEE_POLY, CrcFunc, crc32_func
from stanpkg.stores.filestore.limits import ChannelLimits, LimitsSpec, apply_limits, limits_for
from stanpkg.stores.filestore.reader import SliceReader, StoredMessage
from stanpkg.stores.filestore.serverfile import SERVER_FILE, read_server_file
from stanpkg.stores.filestore.slices import SliceInfo, discover_slices, recover_slice
from stanpkg.stores.filestore.subsfile import (
    SUBS_FILE,
    SubscriptionRecord,
    SubsReplay,
    replay_subs,
)
from stanpkg.stores.filestore.truncation import acquire_truncate_witness, truncate_file

__all__ = ["ChannelInfo", "Datastore", "open_datastore"]


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """A recovered channel. ``first_seq > last_seq`` when every message was removed;
    both are 0 for a channel that never had a message."""

    name: str
    path: str
    first_seq: int
    last_seq: int
    msg_count: int
    total_bytes: int  # FILE accounting: stored payload size + 40 per message
    slices: tuple[SliceInfo, ...]
    subscriptions: Mapping[int, SubscriptionRecord] = field(repr=False)
    max_sub_id: int
    limits: ChannelLimits
    subs_replay: SubsReplay | None = field(default=None, repr=False)
    # Slices still on disk whose messages were all removed by limits/expiry at recovery.
    removed_slices: tuple[SliceInfo, ...] = ()


@dataclass
class Datastore:
    """A recovered datastore (a snapshot: nothing is kept open)."""

    path: str
    server_info: spb.ServerInfo | None
    clients: dict[str, ClientRecord]
    channels: dict[str, ChannelInfo]
    reader: SliceReader
    log: list[str] = field(default_factory=list)

    @property
    def cluster_id(self) -> str | None:
        return self.server_info.ClusterID if self.server_info is not None else None

    @property
    def node_id(self) -> str | None:
        return self.server_info.NodeID if self.server_info is not None else None

    def channel(self, name: str) -> ChannelInfo:
        try:
            return self.channels[name]
        except KeyError:
            raise KeyError(f"unknown channel: {name!r}") from None

    def slices(self, channel: str) -> tuple[SliceInfo, ...]:
        """Slices holding the channel's messages, oldest first (for pruning by seq/time)."""
        return self.channel(channel).slices

    def iter_messages(
        self, channel: str, from_seq: int | None = None, to_seq: int | None = None
    ) -> Iterator[StoredMessage]:
        """Messages first_seq..last_seq (clipped to the given range), decrypted."""
        info = self.channel(channel)
        lo = info.first_seq if from_seq is None else max(from_seq, info.first_seq)
        hi = info.last_seq if to_seq is None else min(to_seq, info.last_seq)
        for sl in info.slices:
            if sl.last_seq < lo or sl.first_live_seq > hi:
                continue
            yield from self.reader.iter_messages(sl, lo, hi)

    def get_message(self, channel: str, seq: int) -> StoredMessage | None:
        """Lookup of one sequence; None outside first..last."""
        return next(self.iter_messages(channel, seq, seq), None)


def open_datastore(
    path: str | os.PathLike[str],
    *,
    encryption_key: bytes | str | None = None,
    limits: LimitsSpec = None,
    do_crc: bool = True,
    crc_poly: int = IEEE_POLY,
    truncate_bad_eof: bool = False,
    repair: bool | None = None,
    now_ns: int | None = None,
    on_bad_record: BadRecordHandler | None = None,
    select_channels: Callable[[str], bool] | None = None,
) -> Datastore:
    """Recover the datastore at ``path``.

    ``limits`` are the channels' effective limits (re-applied as at recovery, so first_seq
    matches the server's); ``now_ns`` is the clock used for age expiration.
    ``truncate_bad_eof`` writes: it takes the one-shot witness, cuts records cut short and
    (``repair`` defaults to it) does the reference's other recovery writes.
    ``on_bad_record`` tolerates damaged message records without writing (see
    ``recover_slice``); other files stay strict. ``select_channels`` limits recovery to
    the channels it accepts (readers interested in a few channels of a big store).
    """
    root = os.fspath(path)
    if not os.path.isdir(root):
        raise FileStoreError("datastore directory not found", path=root)
    repair = truncate_bad_eof if repair is None else repair
    if truncate_bad_eof:
        acquire_truncate_witness(root)
    crc = crc32_func(crc_poly)
    check = crc if do_crc else None
    now = time.time_ns() if now_ns is None else now_ns
    log: list[str] = []

    server_path = os.path.join(root, SERVER_FILE)
    info = read_server_file(server_path, crc=check) if os.path.exists(server_path) else None
    clients_path = os.path.join(root, CLIENTS_FILE)
    clients: dict[str, ClientRecord] = {}
    if os.path.exists(clients_path):
        replay = replay_clients(clients_path, crc=check, truncate_bad_eof=truncate_bad_eof)
        clients = replay.clients
        if repair and replay.zero_tail_at is not None:
            truncate_file(clients_path, replay.zero_tail_at)

    channel_names = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if info is None and channel_names:
        log.append(
            "Server information was not recovered, however channels are present. "
            "Will initialize server and restart recovery!"
        )
    channels = {}
    for name in channel_names:
        if select_channels is not None and not select_channels(name):
            continue
        channels[name] = _recover_channel(
            root,
            name,
            crc=crc,
            do_crc=do_crc,
            limits=limits_for(limits, name),
            now_ns=now,
            truncate_bad_eof=truncate_bad_eof,
            repair=repair,
            log=log,
            on_bad_record=on_bad_record,
        )
    key_hash = master_key_hash(encryption_key) if encryption_key else None
    reader = SliceReader(crc_poly=crc_poly, do_crc=do_crc, key_hash=key_hash)
    return Datastore(root, info, clients, channels, reader, log)


def _recover_channel(
    root: str,
    name: str,
    *,
    crc: CrcFunc,
    do_crc: bool,
    limits: ChannelLimits,
    now_ns: int,
    truncate_bad_eof: bool,
    repair: bool,
    log: list[str],
    on_bad_record: BadRecordHandler | None = None,
) -> ChannelInfo:
    channel_dir = os.path.join(root, name)
    recovered = []
    for number in discover_slices(channel_dir):
        rs = recover_slice(
            name,
            channel_dir,
            number,
            crc=crc,
            do_crc=do_crc,
            truncate_bad_eof=truncate_bad_eof,
            repair=repair,
            on_bad_record=on_bad_record,
        )
        log.extend(rs.log)
        if rs.info.count:  # empty slices are not part of the channel
            recovered.append(rs)
    extent = apply_limits([r.info for r in recovered], [r.index for r in recovered], limits, now_ns)
    subs_path = os.path.join(channel_dir, SUBS_FILE)
    subs: SubsReplay | None = None
    if os.path.exists(subs_path):
        subs = replay_subs(
            subs_path, crc=crc if do_crc else None, truncate_bad_eof=truncate_bad_eof
        )
        if repair and subs.zero_tail_at is not None:
            truncate_file(subs_path, subs.zero_tail_at)
    return ChannelInfo(
        name=name,
        path=channel_dir,
        first_seq=extent.first_seq,
        last_seq=extent.last_seq,
        msg_count=extent.count,
        total_bytes=extent.total_bytes,
        slices=extent.slices,
        subscriptions=subs.subs if subs else {},
        max_sub_id=subs.max_sub_id if subs else 0,
        limits=limits,
        subs_replay=subs,
        removed_slices=extent.dropped,
    )
