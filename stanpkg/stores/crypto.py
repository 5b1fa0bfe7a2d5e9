"""Encryption at rest of message payloads (spec/encryption.md).

Layout of an encrypted payload: ``code (1) | nonce (12) | ciphertext || tag (16)``.
Code 1 is AES-256-GCM, code 2 ChaCha20-Poly1305; both use a 32-byte key derived per channel
(message stores) or the master hash itself (Raft log). Ciphers come from ``cryptography``.
"""

from __future__ import annotations

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

__all__ = [
    "CIPHER_AES",
    "CIPHER_CHACHA",
    "NONCE_SIZE",
    "OVERHEAD",
    "TAG_SIZE",
    "EncryptionError",
    "PayloadCipher",
    "channel_cipher",
    "channel_key",
    "cipher_code",
    "is_encrypted_payload",
    "master_key_hash",
    "raft_cipher",
]

CIPHER_AES = 1
CIPHER_CHACHA = 2
NONCE_SIZE = 12
TAG_SIZE = 16
OVERHEAD = 1 + NONCE_SIZE + TAG_SIZE  # 29 bytes per encrypted payload

_CIPHER_NAMES = {"AES": CIPHER_AES, "CHACHA": CIPHER_CHACHA}
# Go's error texts on authentication failure (logged by the reference on a wrong key).
_AUTH_FAILED = {
    CIPHER_AES: "cipher: message authentication failed",
    CIPHER_CHACHA: "chacha20poly1305: message authentication failed",
}
_NONCE_MOD = 1 << (8 * NONCE_SIZE)


class EncryptionError(Exception):
    """Cipher selection or decryption failed (never returns garbage)."""


def cipher_code(name: str) -> int:
    """The code of a cipher named by the plan ("AES" or "CHACHA", case-insensitive)."""
    code = _CIPHER_NAMES.get(name.upper())
    if code is None:
        raise EncryptionError("encryption cipher not supported")
    return code


def master_key_hash(user_key: bytes | str) -> bytes:
    key = user_key.encode() if isinstance(user_key, str) else user_key
    return hashlib.sha256(key).digest()


def channel_key(master_hash: bytes, channel: str) -> bytes:
    """Per-channel key, reproducing the Go quirk of a zero-filled prefix.

    Go allocates a buffer of *length* len(master)+1+len(channel) and then appends to it,
    so that many zero bytes precede the intended input; without them Go data won't decrypt.
    """
    name = channel.encode()
    prefix = bytes(len(master_hash) + 1 + len(name))
    return hashlib.sha256(prefix + master_hash + b"." + name).digest()


def is_encrypted_payload(payload: bytes) -> bool:
    """True when the payload carries a known cipher code (what decryption will attempt)."""
    return len(payload) > 0 and payload[0] in _AUTH_FAILED


class PayloadCipher:
    """Encrypts/decrypts payloads with one derived 32-byte key.

    Nonces: 4 random bytes + big-endian uint64 counter, the 96-bit value incremented after
    every encryption (Go's scheme); readers always take the nonce stored in the payload.
    """

    __slots__ = ("_aeads", "_code", "_key", "_nonce", "_prefix")

    def __init__(self, key: bytes, cipher: int = CIPHER_AES, *, initial_counter: int = 1) -> None:
        if len(key) != 32:
            raise EncryptionError(f"derived key must be 32 bytes, got {len(key)}")
        if cipher not in _AUTH_FAILED:
            raise EncryptionError("encryption cipher not supported")
        self._key = key
        self._code = cipher
        self._prefix = bytes((cipher,))  # the cipher code, first byte of every payload
        self._aeads: dict[int, AESGCM | ChaCha20Poly1305] = {}
        start = os.urandom(4) + (initial_counter % (1 << 64)).to_bytes(8, "big")
        self._nonce = int.from_bytes(start, "big")

    @property
    def cipher(self) -> int:
        return self._code

    def _aead(self, code: int) -> AESGCM | ChaCha20Poly1305:
        aead = self._aeads.get(code)
        if aead is None:
            aead = AESGCM(self._key) if code == CIPHER_AES else ChaCha20Poly1305(self._key)
            self._aeads[code] = aead
        return aead

    def encrypt(self, plaintext: bytes) -> bytes:
        """Encrypt a payload; empty payloads are never encrypted (returned as is)."""
        if not plaintext:
            return plaintext
        nonce = self._nonce.to_bytes(NONCE_SIZE, "big")
        self._nonce = (self._nonce + 1) % _NONCE_MOD
        sealed = self._aead(self._code).encrypt(nonce, plaintext, None)
        return b"".join((self._prefix, nonce, sealed))

    def decrypt(self, payload: bytes) -> bytes:
        """Decrypt per encryption.md §4.2; data without a cipher code is plaintext."""
        if not payload:
            return payload
        code = payload[0]
        if code not in _AUTH_FAILED:
            return payload  # written before encryption was turned on
        if len(payload) <= 1 + NONCE_SIZE:
            raise EncryptionError(f"trying to decrypt data that is not (len={len(payload)})")
        nonce = payload[1 : 1 + NONCE_SIZE]
        try:
            return self._aead(code).decrypt(nonce, payload[1 + NONCE_SIZE :], None)
        except InvalidTag:
            raise EncryptionError(_AUTH_FAILED[code]) from None


def channel_cipher(
    user_key: bytes | str, channel: str, cipher: int = CIPHER_AES, *, next_seq: int = 1
) -> PayloadCipher:
    """Cipher of a channel's message store; ``next_seq`` = last stored sequence + 1."""
    return PayloadCipher(
        channel_key(master_key_hash(user_key), channel), cipher, initial_counter=next_seq
    )


def raft_cipher(
    user_key: bytes | str, cipher: int = CIPHER_AES, *, next_index: int = 1
) -> PayloadCipher:
    """Cipher of the Raft log (clustered mode): the master hash is the key."""
    return PayloadCipher(master_key_hash(user_key), cipher, initial_counter=next_index)
