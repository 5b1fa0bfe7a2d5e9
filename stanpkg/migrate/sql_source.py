"""An SQL store (PostgreSQL, MySQL/MariaDB, SQLite) as a migration source.

Read through :func:`~stanpkg.stores.sql.snapshot.open_snapshot`: only SELECTs, in one
read-only transaction, with the rules of the server's recovery applied in memory. The
messages are the stored ``MsgProto`` rows, decrypted with the plan's key unless asked to
keep them as stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from stanpkg.migrate.source_store import (
    OnBadRecord,
    SourceChannel,
    SourceError,
    SourceMessage,
    SourceStore,
)
from stanpkg.plan.model import Plan
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.base import StoreError
from stanpkg.stores.crypto import EncryptionError, PayloadCipher, channel_cipher, cipher_code
from stanpkg.stores.sql.snapshot import SqlSnapshot, open_snapshot

__all__ = ["open_sql_source"]


@dataclass
class _SqlReader:
    snapshot: SqlSnapshot
    key: bytes | None
    cipher: int
    _ciphers: dict[str, PayloadCipher] = field(default_factory=dict)

    def messages(
        self, channel: str, from_seq: int, on_bad: OnBadRecord | None
    ) -> Iterator[SourceMessage]:
        try:
            for seq, record in self.snapshot.messages(channel, from_seq):
                try:
                    msg = pb.MsgProto.FromString(record)
                    data = self._plain(channel, msg.data)
                except (DecodeError, EncryptionError) as exc:
                    text = (
                        f"sql: unable to decode table Messages, row seq {seq} (channel "
                        f'"{channel}"): {exc}'
                    )
                    if on_bad is None:
                        raise SourceError(text) from None
                    on_bad(text)
                    continue
                yield SourceMessage(seq, msg.reply, msg.timestamp, data)
        except StoreError as exc:
            raise SourceError(f"channel {channel!r}: {exc}") from exc

    def _plain(self, channel: str, data: bytes) -> bytes:
        if self.key is None or not data:
            return data
        cipher = self._ciphers.get(channel)
        if cipher is None:
            cipher = self._ciphers[channel] = channel_cipher(self.key, channel, self.cipher)
        return cipher.decrypt(data)


def open_sql_source(
    plan: Plan,
    *,
    wants_channel: Callable[[str], bool],
    permissive: bool = False,
    keep_encrypted: bool = False,
) -> SourceStore:
    """The SQL store of ``plan`` read-only, as its server would recover it."""
    options = plan.sql_options
    skipped: list[str] = []
    try:
        snapshot = open_snapshot(
            options.driver,
            options.source.reveal(),
            plan.store_limits,
            wants_channel=wants_channel,
            on_bad_row=skipped.append if permissive else None,
        )
    except StoreError as exc:
        raise SourceError(f"{options.driver} store: {exc}") from exc
    key: bytes | None = None
    cipher = 0
    if plan.encrypt and not keep_encrypted:
        key = plan.encryption_key.reveal().encode()
        cipher = cipher_code(plan.encryption_cipher)
    channels = tuple(
        SourceChannel(c.name, *c.bounds, limits=c.limits, subscriptions=c.subscriptions)
        for c in sorted(snapshot.channels.values(), key=lambda c: c.name)
    )
    return SourceStore(
        description=f"SQL store ({options.driver})",
        server_info=snapshot.server_info,
        clients=snapshot.clients,
        channels=channels,
        _reader=_SqlReader(snapshot, key, cipher),
        permissive=permissive,
        skipped=skipped,
    )
