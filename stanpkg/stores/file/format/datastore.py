"""Read API over a whole FILE datastore (``stanpkg export``, the Spark source, tools).

``open_datastore`` recovers like the running store, through the same channel recovery
(:func:`~stanpkg.stores.file.format.channel.recover_channel`), so it sees what a server
would serve from the same files; unless asked to repair/truncate it never writes: index
rebuilds stay in memory, zero tails are only skipped, the truncate witness is left alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from stanpkg.stores.base import ClientRecord, ServerInfo
from stanpkg.stores.crypto import master_key_hash
from stanpkg.stores.file.format.channel import (
    ChannelInfo,
    ChannelJob,
    ChannelRecoveryError,
    recover_channel,
)
from stanpkg.stores.file.format.clientsfile import CLIENTS_FILE, replay_clients
from stanpkg.stores.file.format.errors import BadRecordHandler, FileStoreError
from stanpkg.stores.file.format.framing import IEEE_POLY, crc32_func
from stanpkg.stores.file.format.limits import LimitsSpec, limits_for
from stanpkg.stores.file.format.reader import SliceReader, StoredMessage
from stanpkg.stores.file.format.serverfile import SERVER_FILE, read_server_file
from stanpkg.stores.file.format.slices import SliceInfo
from stanpkg.stores.file.format.truncation import acquire_truncate_witness

__all__ = ["Datastore", "open_datastore"]


@dataclass
class Datastore:
    """A recovered datastore (a snapshot: nothing is kept open)."""

    path: str
    server_info: ServerInfo | None
    clients: dict[str, ClientRecord]
    channels: dict[str, ChannelInfo]
    reader: SliceReader
    log: list[str] = field(default_factory=list)

    @property
    def cluster_id(self) -> str | None:
        return self.server_info.cluster_id if self.server_info is not None else None

    @property
    def node_id(self) -> str | None:
        return self.server_info.node_id if self.server_info is not None else None

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

    ``limits`` are the channels' limits (re-applied as at recovery, so first_seq matches
    the server's: pass the plan's ``store_limits``); ``now_ns`` is the clock used for age
    expiration. ``encryption_key`` is the store's key (payloads are decrypted with the
    cipher each one names). ``truncate_bad_eof`` writes: it takes the one-shot witness,
    cuts records cut short and (``repair`` defaults to it) does the reference's other
    recovery writes. ``on_bad_record`` tolerates damaged message records without writing
    (see ``recover_slice``); other files stay strict. ``select_channels`` limits recovery
    to the channels it accepts (readers interested in a few channels of a big store).
    """
    root = os.fspath(path)
    if not os.path.isdir(root):
        raise FileStoreError("datastore directory not found", path=root)
    repair = truncate_bad_eof if repair is None else repair
    if truncate_bad_eof:
        acquire_truncate_witness(root)
    check = crc32_func(crc_poly) if do_crc else None
    now = time.time_ns() if now_ns is None else now_ns
    log: list[str] = []

    server_path = os.path.join(root, SERVER_FILE)
    info = read_server_file(server_path, crc=check) if os.path.exists(server_path) else None
    clients_path = os.path.join(root, CLIENTS_FILE)
    clients: dict[str, ClientRecord] = {}
    if os.path.exists(clients_path):
        replay = replay_clients(
            clients_path, crc=check, truncate_bad_eof=truncate_bad_eof, repair=repair
        )
        clients = replay.clients
        log.extend(replay.truncation_log)

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
        job = ChannelJob(
            root,
            name,
            now,
            limits_for(limits, name),
            crc_poly=crc_poly,
            do_crc=do_crc,
            truncate_bad_eof=truncate_bad_eof,
            repair=repair,
        )
        try:
            channel = recover_channel(job, on_bad_record=on_bad_record)
        except ChannelRecoveryError as exc:
            raise exc.cause from None
        log.extend(text for _, text in channel.log)
        channels[name] = channel
    key_hash = master_key_hash(encryption_key) if encryption_key else None
    reader = SliceReader(crc_poly=crc_poly, do_crc=do_crc, key_hash=key_hash)
    return Datastore(root, info, clients, channels, reader, log)
