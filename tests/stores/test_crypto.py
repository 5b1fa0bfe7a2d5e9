"""Encryption at rest (spec/encryption.md)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stanpkg.stores.crypto import (
    CIPHER_AES,
    CIPHER_CHACHA,
    OVERHEAD,
    EncryptionError,
    PayloadCipher,
    channel_cipher,
    channel_key,
    cipher_code,
    is_encrypted_payload,
    master_key_hash,
    raft_cipher,
)


def test_channel_key_reproduces_go_zero_prefix() -> None:
    master = hashlib.sha256(b"mysecretkey").digest()
    expected = hashlib.sha256(bytes(36) + master + b".foo").digest()
    assert channel_key(master_key_hash("mysecretkey"), "foo") == expected
    assert channel_key(master, "foo") != hashlib.sha256(master + b".foo").digest()


@pytest.mark.parametrize("code", [CIPHER_AES, CIPHER_CHACHA])
def test_layout_and_round_trip(code: int) -> None:
    enc = channel_cipher(b"k", "foo", code, next_seq=1)
    blob = enc.encrypt(b"hello world")
    assert blob[0] == code
    assert blob[5:13] == (1).to_bytes(8, "big")  # counter = last seq + 1
    assert len(blob) == len(b"hello world") + OVERHEAD
    # any reader with the key decrypts, whatever cipher it would encrypt with
    other = channel_cipher(b"k", "foo", CIPHER_AES if code == CIPHER_CHACHA else CIPHER_CHACHA)
    assert other.decrypt(blob) == b"hello world"


def test_nonce_is_a_96_bit_counter() -> None:
    enc = PayloadCipher(bytes(32), CIPHER_AES, initial_counter=(1 << 64) - 1)
    a, b = enc.encrypt(b"x"), enc.encrypt(b"x")
    na, nb = int.from_bytes(a[1:13], "big"), int.from_bytes(b[1:13], "big")
    assert nb == na + 1  # carry propagates into the random prefix
    assert a[5:13] == b"\xff" * 8 and b[5:13] == bytes(8)


def test_plaintext_detection_and_short_payloads() -> None:
    enc = channel_cipher(b"k", "c")
    assert enc.encrypt(b"") == b"" and enc.decrypt(b"") == b""
    assert enc.decrypt(b"\x00plain") == b"\x00plain"
    assert enc.decrypt(b"{json}") == b"{json}"
    assert not is_encrypted_payload(b"{json}") and is_encrypted_payload(b"\x02abc")
    with pytest.raises(EncryptionError, match=r"trying to decrypt data that is not \(len=13\)"):
        enc.decrypt(b"\x01" + bytes(12))


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (CIPHER_AES, "cipher: message authentication failed"),
        (CIPHER_CHACHA, "chacha20poly1305: message authentication failed"),
    ],
)
def test_wrong_key_never_returns_garbage(code: int, text: str) -> None:
    blob = channel_cipher(b"right", "c", code).encrypt(b"secret payload")
    with pytest.raises(EncryptionError, match=text):
        channel_cipher(b"wrong", "c", code).decrypt(blob)
    with pytest.raises(EncryptionError):
        channel_cipher(b"right", "other-channel", code).decrypt(blob)


# The key's precedence and the by-CPU default cipher are the plan's: tests/plan/test_compile.py.


def test_cipher_selection() -> None:
    assert cipher_code("aes") == CIPHER_AES and cipher_code("ChaCha") == CIPHER_CHACHA
    with pytest.raises(EncryptionError, match="encryption cipher not supported"):
        cipher_code("des")


def test_raft_key_is_master_hash() -> None:
    blob = raft_cipher(b"k", CIPHER_CHACHA, next_index=7).encrypt(b"op")
    assert PayloadCipher(hashlib.sha256(b"k").digest()).decrypt(blob) == b"op"


@settings(max_examples=50, deadline=None)
@given(data=st.binary(min_size=0, max_size=300), code=st.sampled_from([1, 2]))
def test_round_trip_property(data: bytes, code: int) -> None:
    enc = channel_cipher(b"key", "chan", code)
    assert enc.decrypt(enc.encrypt(data)) == data
