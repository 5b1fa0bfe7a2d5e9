"""Encryption at rest for any store: a wrapper, as the reference's ``cryptostore.go``.

:class:`EncryptingStore` delegates everything to the store it wraps (stores/delegating.py);
only each channel's message store is wrapped, encrypting the ``data`` of every message on
the way in and decrypting it on the way out (spec/encryption.md). The records the inner store holds
are byte for byte what the Go server writes, so a FILE store stays readable both ways.
Unencrypted plans get no wrapper at all.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from stanpkg.plan.model import Plan
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.proto.encoders import MsgEncoder
from stanpkg.stores.base import (
    ADOPTS,
    BEGINS_FLUSH,
    LOCATES,
    AdoptingStore,
    ChannelStore,
    MessageBatch,
    MessageStore,
    PipeliningMessages,
    RecoveredChannel,
    RecoveredState,
    Store,
    StoredRun,
    StoreError,
    StoreLog,
)
from stanpkg.stores.crypto import (
    EncryptionError,
    PayloadCipher,
    channel_key,
    cipher_code,
    master_key_hash,
)
from stanpkg.stores.delegating import DelegatingMessageStore, DelegatingStore
from stanpkg.stores.recent_records import RecentRecords

__all__ = [
    "KEY_CHECK_MESSAGES",
    "EncryptingMessageStore",
    "EncryptingPipeliningMessageStore",
    "EncryptingStore",
    "StoreEncryption",
    "decrypt_record",
    "encryption_from_plan",
]

KEY_CHECK_MESSAGES = 16  # newest messages of each channel test-decrypted at recovery
# Plaintext of the newest records, so deliveries right after a publish decrypt nothing.
RECENT_MAX_MSGS = 4096
RECENT_MAX_BYTES = 1024 * 1024
RECENT_IDLE_SECONDS = 1.0
_MAX_REPORTED_LOOKUP_ERRORS = 1000


@dataclass(frozen=True, slots=True)
class StoreEncryption:
    """The key (raw bytes, never printed) and the code of the cipher that encrypts."""

    key: bytes = field(repr=False)
    cipher: int


def encryption_from_plan(plan: Plan) -> StoreEncryption | None:
    """None when the plan does not encrypt; :class:`StoreError` with the reference's
    texts when the key is missing or the cipher unknown (the plan's rules refuse both
    already; a store built from a hand-made plan must not rely on them)."""
    if not plan.encrypt:
        return None
    secret = plan.encryption_key.reveal()
    if not secret:
        raise StoreError("encryption key required")
    try:
        code = cipher_code(plan.encryption_cipher)
    except EncryptionError as exc:
        raise StoreError(str(exc)) from None
    return StoreEncryption(os.fsencode(secret), code)  # the value's raw bytes, untrimmed


def decrypt_record(record: bytes, cipher: PayloadCipher) -> bytes:
    """The MsgProto as delivered: ``data`` decrypted (data without a cipher code is
    plaintext, written before encryption was turned on)."""
    return _with_data(record, cipher.decrypt)


def _with_data(record: bytes, transform: Callable[[bytes], bytes]) -> bytes:
    msg = pb.MsgProto.FromString(record)
    if not msg.data:
        return record
    msg.data = transform(msg.data)
    return msg.SerializeToString()


class EncryptingMessageStore(DelegatingMessageStore):
    """One channel's messages, encrypted in ``inner``."""

    def __init__(
        self, inner: MessageStore, name: str, cipher: PayloadCipher, owner: EncryptingStore
    ) -> None:
        super().__init__(inner)
        self.name = name
        self.cipher = cipher
        self._owner = owner
        self._recent = RecentRecords(RECENT_MAX_MSGS, RECENT_MAX_BYTES, RECENT_IDLE_SECONDS)
        self._lookup_errors: set[int] = set()

    def store(self, batch: MessageBatch) -> StoredRun:
        encrypt = self.cipher.encrypt
        sealed = [(reply, encrypt(data)) for reply, data in batch.messages]
        run = self.inner.store(MessageBatch(batch.timestamp, sealed, batch.guids))
        if run.last < run.first:
            return run
        # The plaintext records, for the deliveries that follow at once.
        records = MsgEncoder(self.name, batch.timestamp).encode_run(run.first, batch.messages)
        now = time.monotonic()
        recent = self._recent
        recent.remember(records, run.first, now)
        recent.forget_before(self.inner.first_sequence)  # the limits may have removed some
        self._owner.drop_idle_plaintext(now)
        return run

    def lookup(self, sequence: int) -> bytes | None:
        recent = self._recent
        i = sequence - recent.first
        if 0 <= i < len(recent.records):
            return recent.records[i]
        record = self.inner.lookup(sequence)
        if record is None:
            return None
        try:
            return decrypt_record(record, self.cipher)
        except (EncryptionError, DecodeError) as exc:
            self._report_lookup_error(sequence, exc)
            return None

    def lookup_run(self, first: int, last: int) -> list[bytes | None]:
        lookup = self.lookup  # decrypted, not the inner store's run
        return [lookup(seq) for seq in range(first, last + 1)]

    def _report_lookup_error(self, sequence: int, exc: Exception) -> None:
        # Once per message: a subscriber stuck on it would otherwise flood the log.
        errors = self._lookup_errors
        if sequence in errors or len(errors) > _MAX_REPORTED_LOOKUP_ERRORS:
            return
        errors.add(sequence)
        hint = "; wrong encryption key?" if isinstance(exc, EncryptionError) else ""
        self._owner.log.error(f"Error looking up message {self.name}:{sequence} ({exc}{hint})")

    def expire(self, now: int) -> int:
        oldest = self.inner.expire(now)
        self._recent.forget_before(self.inner.first_sequence)
        return oldest

    def drop_idle_plaintext(self, now: float) -> None:
        self._recent.drop_if_idle(now)

    def check_key(self) -> None:
        """Decrypt the newest (and the oldest) stored messages: a wrong key fails
        recovery with a clear error instead of every later delivery."""
        inner = self.inner
        if not inner.state()[0]:
            return
        first, last = inner.first_sequence, inner.last_sequence
        newest = range(max(first, last - KEY_CHECK_MESSAGES + 1), last + 1)
        for seq in (*newest, first) if first < newest.start else newest:
            record = inner.lookup(seq)
            if record is None:
                continue
            try:
                decrypt_record(record, self.cipher)
            except (EncryptionError, DecodeError) as exc:
                raise StoreError(self._recovery_error(seq, exc)) from None

    def _recovery_error(self, seq: int, exc: Exception) -> str:
        name = self.name
        if isinstance(exc, EncryptionError):
            reason = f"unable to decrypt message {name}:{seq} ({exc}); wrong encryption key?"
        else:
            reason = f"unable to decode message {name}:{seq} ({exc})"
        locating = self.inner.capability(LOCATES)
        where = locating.locate(seq) if locating is not None else ""
        if where:
            reason = f"{reason} ({where})"
        return f"unable to recover message store for [{name}]: {reason}"

    async def flush(self) -> None:
        await self._forget_plaintext_on_failure(self.inner.flush())

    async def _forget_plaintext_on_failure(self, flush: Awaitable[None]) -> None:
        try:
            await flush
        except StoreError:
            # A failed write leaves no message behind (a clustered store brings other
            # messages in at those sequences later): keep no plaintext for them.
            self._recent.clear()
            raise

    def close(self) -> None:
        self._recent.clear()
        self.inner.close()


class EncryptingPipeliningMessageStore(EncryptingMessageStore, PipeliningMessages):
    """One channel's messages, encrypted in an ``inner`` store whose writes start at once
    and are awaited later (:class:`PipeliningMessages`)."""

    def __init__(
        self,
        inner: MessageStore,
        pipelining: PipeliningMessages,
        name: str,
        cipher: PayloadCipher,
        owner: EncryptingStore,
    ) -> None:
        super().__init__(inner, name, cipher, owner)
        self._pipelining = pipelining

    async def flush(self) -> None:
        await self.begin_flush()

    def begin_flush(self) -> Awaitable[None]:
        return self._forget_plaintext_on_failure(self._pipelining.begin_flush())


class EncryptingStore(DelegatingStore, AdoptingStore):
    """Any store, its message payloads encrypted at rest."""

    def __init__(self, inner: Store, key: bytes, cipher: int, log: StoreLog) -> None:
        super().__init__(inner)
        self.log = log
        self._key_hash = master_key_hash(key)
        self._cipher = cipher
        self._channels: dict[str, ChannelStore] = {}  # the wrapped ones, by name
        self._next_sweep = 0.0

    def _wrap(self, channel: ChannelStore) -> ChannelStore:
        name, inner = channel.name, channel.msgs
        # Go's nonce scheme: the counter starts past every sequence already stored.
        cipher = PayloadCipher(
            channel_key(self._key_hash, name), self._cipher, initial_counter=inner.last_sequence + 1
        )
        pipelining = inner.capability(BEGINS_FLUSH)
        msgs = (
            EncryptingMessageStore(inner, name, cipher, self)
            if pipelining is None
            else EncryptingPipeliningMessageStore(inner, pipelining, name, cipher, self)
        )
        wrapped = ChannelStore(name, msgs, channel.subs, channel.limits)
        self._channels[name] = wrapped
        return wrapped

    def recover(self) -> RecoveredState | None:
        state = self.inner.recover()
        return None if state is None else self._wrap_state(state)

    def adopt(self, state: RecoveredState) -> RecoveredState:
        inner = self.inner.capability(ADOPTS)  # a wrapper inside this one adopts first
        return self._wrap_state(state if inner is None else inner.adopt(state))

    def _wrap_state(self, state: RecoveredState) -> RecoveredState:
        channels = []
        for recovered in state.channels:
            wrapped = self._wrap(recovered.store)
            assert isinstance(wrapped.msgs, EncryptingMessageStore)
            wrapped.msgs.check_key()
            channels.append(RecoveredChannel(wrapped, recovered.subscriptions))
        return RecoveredState(state.info, state.clients, channels)

    def create_channel(self, name: str) -> ChannelStore:
        wrapped = self._channels.get(name)
        if wrapped is not None:
            return wrapped
        return self._wrap(self.inner.create_channel(name))

    def delete_channel(self, name: str) -> None:
        self._channels.pop(name, None)
        self.inner.delete_channel(name)

    def drop_idle_plaintext(self, now: float) -> None:
        """Called by each stored batch; at most once a second, the channels idle for a
        second give their plaintext records up."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + RECENT_IDLE_SECONDS
        for channel in self._channels.values():
            assert isinstance(channel.msgs, EncryptingMessageStore)
            channel.msgs.drop_idle_plaintext(now)

    def close(self) -> None:
        self._channels.clear()
        self.inner.close()
