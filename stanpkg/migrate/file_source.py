"""A FILE store, opened read-only for a migration: recovered with the shared reader
(``open_datastore``), the channel limits re-applied as the server would at start-up,
nothing written (no lock file, no truncation, no index rebuild on disk). Messages are then
read slice by slice, decrypted unless asked to keep them as stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stanpkg.migrate.source_store import (
    OnBadRecord,
    SourceChannel,
    SourceError,
    SourceMessage,
    SourceStore,
)
from stanpkg.plan.model import Plan
from stanpkg.stores.file.format import IEEE_POLY, Datastore, FileStoreError, open_datastore

__all__ = ["open_file_source"]


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


def open_file_source(
    plan: Plan,
    *,
    wants_channel: Callable[[str], bool],
    permissive: bool = False,
    keep_encrypted: bool = False,
) -> SourceStore:
    """The FILE store of ``plan`` (its ``dir``, limits, CRC and encryption key)."""
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
