"""The FILE store's own encryption of message payloads (spec/encryption.md).

Everything the running store does for encryption is here, apart from a few call sites
(``FileMessageStore._cipher``, the recovery's key check, the configuration's key and
cipher), so that it can go as a whole once encryption wraps every store. Reading
encrypted stores (``SliceReader``) is the format's and stays.
"""

from __future__ import annotations

from collections.abc import Callable

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.crypto import PayloadCipher, channel_key
from stanpkg.stores.file.format.channel import ChannelInfo
from stanpkg.stores.file.format.reader import SliceReader

__all__ = ["KEY_CHECK_MESSAGES", "check_key", "decrypt_record", "encrypt_record", "message_cipher"]

KEY_CHECK_MESSAGES = 16  # newest messages of each channel test-decrypted at recovery


def message_cipher(key_hash: bytes, channel: str, cipher: int, next_seq: int) -> PayloadCipher:
    """The cipher of a channel's message store; ``next_seq`` = last stored sequence + 1."""
    return PayloadCipher(channel_key(key_hash, channel), cipher, initial_counter=next_seq)


def check_key(info: ChannelInfo, key_hash: bytes, *, crc_poly: int, do_crc: bool) -> None:
    """Decrypt the channel's newest (and oldest) messages: a wrong key fails recovery
    with a clear error (``MessageDecryptionError``) instead of every later delivery."""
    reader = SliceReader(crc_poly=crc_poly, do_crc=do_crc, key_hash=key_hash)
    last = info.slices[-1]
    lo = max(last.first_live_seq, last.last_seq - KEY_CHECK_MESSAGES + 1)
    for _ in reader.iter_messages(last, lo, last.last_seq):
        pass
    for sl in info.slices:
        if sl.live_count:
            reader.read_message(sl, info.first_seq)
            break


def decrypt_record(payload: bytes, cipher: PayloadCipher) -> bytes:
    """The MsgProto as delivered: stored payload with its ``data`` decrypted."""
    return _with_data(payload, cipher.decrypt)


def encrypt_record(record: bytes, cipher: PayloadCipher) -> bytes:
    """The MsgProto as stored: ``data`` replaced by its encrypted form (empty stays)."""
    return _with_data(record, cipher.encrypt)


def _with_data(record: bytes, transform: Callable[[bytes], bytes]) -> bytes:
    msg = pb.MsgProto.FromString(record)
    if not msg.data:
        return record
    msg.data = transform(msg.data)
    return msg.SerializeToString()
