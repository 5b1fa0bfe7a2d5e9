"""The store a standalone server's configuration describes, opened read-only.

A FILE store is recovered with the shared reader (``open_datastore``): the channel
limits re-applied as the server would at start-up, nothing written (no lock file, no
truncation, no index rebuild on disk). Messages are then read slice by slice, decrypted
unless asked to keep them as stored. An SQL store is read by :mod:`.sql_source`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from stanpkg.plan.limits import Limits
from stanpkg.plan.model import Plan, StoreType
from stanpkg.stores.base import ClientRecord, RecoveredSubscription, ServerInfo
from stanpkg.stores.file.format import IEEE_POLY, Datastore, FileStoreError, open_datastore

__all__ = [
    "MessageReader",
    "OnBadRecord",
    "SourceChannel",
    "SourceError",
    "SourceMessage",
    "SourceStore",
    "open_source",
]


class SourceError(Exception):
    """The source cannot be read (the text names the file and offset when known)."""


class SourceMessage(NamedTuple):
    sequence: int
    reply: str
    timestamp: int  # ns, as stored
    data: bytes


@dataclass(frozen=True)
class SourceChannel:
    """A channel as the standalone server would recover it. ``first_seq > last_seq`` when
    every message was removed; both 0 when it never had one."""

    name: str
    first_seq: int
    last_seq: int
    msg_count: int
    total_bytes: int
    limits: Limits
    subscriptions: tuple[RecoveredSubscription, ...]


OnBadRecord = Callable[[str], None]


class MessageReader(Protocol):
    def messages(
        self, channel: str, from_seq: int, on_bad: OnBadRecord | None
    ) -> Iterator[SourceMessage]:
        """The channel's messages from ``from_seq`` on, in sequence order; a damaged
        record is a :class:`SourceError`, or reported to ``on_bad`` and skipped."""
        ...


@dataclass
class SourceStore:
    """A recovered source: records, channels, and a reader of their messages.
    ``skipped``: the damaged records passed over (``permissive``)."""

    description: str
    server_info: ServerInfo | None
    clients: tuple[ClientRecord, ...]
    channels: tuple[SourceChannel, ...]
    _reader: MessageReader
    permissive: bool = False
    skipped: list[str] = field(default_factory=list)

    def messages(self, channel: str, from_seq: int = 0) -> Iterator[SourceMessage]:
        """The channel's messages from ``from_seq`` on, in sequence order."""
        on_bad = self.note_skipped if self.permissive else None
        return self._reader.messages(channel, from_seq, on_bad)

    def note_skipped(self, text: str) -> None:
        if text not in self.skipped:  # a resumed or verifying pass meets it again
            self.skipped.append(text)


@dataclass(frozen=True)
class _FileReader:
    datastore: Datastore

    def messages(
        self, channel: str, from_seq: int, on_bad: OnBadRecord | None
    ) -> Iterator[SourceMessage]:
        ds = self.datastore
        info = ds.channel(channel)
        lo = max(from_seq, info.first_seq)
        on_bad_record = None if on_bad is None else (lambda error: on_bad(str(error)))
        try:
            for sl in info.slices:
                if sl.last_seq < lo or sl.first_live_seq > info.last_seq:
                    continue
                for msg in ds.reader.iter_messages(
                    sl, lo, info.last_seq, on_bad_record=on_bad_record
                ):
                    yield SourceMessage(msg.sequence, msg.reply, msg.timestamp, msg.data)
        except FileStoreError as exc:
            raise SourceError(f"channel {channel!r}: {exc}") from exc
        except OSError as exc:
            raise SourceError(f"channel {channel!r}: {exc}") from exc


def open_source(
    plan: Plan,
    *,
    wants_channel: Callable[[str], bool],
    permissive: bool = False,
    keep_encrypted: bool = False,
) -> SourceStore:
    """The store of ``plan`` (its ``dir`` or SQL source, limits, CRC and encryption
    key), read-only."""
    if plan.store_type is StoreType.SQL:
        from stanpkg.migrate.sql_source import open_sql_source

        return open_sql_source(
            plan, wants_channel=wants_channel, permissive=permissive, keep_encrypted=keep_encrypted
        )
    if plan.store_type is not StoreType.FILE:
        raise SourceError(
            f"the source store is {plan.store_type.name}: stanpkg migrate reads FILE stores "
            "and SQL stores"
        )
    key: bytes | None = None
    if plan.encrypt and not keep_encrypted:
        key = plan.encryption_key.reveal().encode()
    skipped: list[str] = []

    def note(error: FileStoreError) -> None:
        skipped.append(str(error))

    try:
        ds = open_datastore(
            plan.dir,
            encryption_key=key,
            limits=plan.store_limits,
            do_crc=plan.file_options.crc,
            crc_poly=plan.file_options.crc_poly or IEEE_POLY,
            on_bad_record=note if permissive else None,
            select_channels=wants_channel,
        )
    except FileStoreError as exc:
        raise SourceError(str(exc)) from exc
    except OSError as exc:
        raise SourceError(f"unable to read the store {plan.dir!r}: {exc}") from exc
    channels = tuple(
        SourceChannel(
            name=name,
            first_seq=info.first_seq,
            last_seq=info.last_seq,
            msg_count=info.msg_count,
            total_bytes=info.total_bytes,
            limits=info.limits,
            subscriptions=tuple(
                info.subscriptions[sub_id] for sub_id in sorted(info.subscriptions)
            ),
        )
        for name, info in sorted(ds.channels.items())
    )
    return SourceStore(
        description=f"FILE store {plan.dir}",
        server_info=ds.server_info,
        clients=tuple(ds.clients[client_id] for client_id in sorted(ds.clients)),
        channels=channels,
        _reader=_FileReader(ds),
        permissive=permissive,
        skipped=skipped,
    )
