"""NATS authentication fields of CONNECT: user/password, token, NKey seed, credentials file.

NKeys are Ed25519 keys encoded as base32 with a type prefix and a CRC-16/XMODEM checksum
(the ``nkeys`` format). The server sends a ``nonce`` in INFO; the client signs it with the
seed and sends the signature (base64url, no padding) with its public key or user JWT.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stanpkg.transport.errors import NatsError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_PREFIX_SEED = 18 << 3  # 'S'
_PREFIX_USER = 20 << 3  # 'U'


def _b32decode(text: str) -> bytes:
    text = text.strip()
    return base64.b32decode(text + "=" * (-len(text) % 8))


def _b32encode(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=")


def _crc16(data: bytes) -> int:
    return binascii.crc_hqx(data, 0)  # CRC-16/XMODEM, as in nkeys/crc16.go


def _with_crc(raw: bytes) -> bytes:
    return raw + _crc16(raw).to_bytes(2, "little")


@dataclass(frozen=True)
class NKeySeed:
    """A decoded NKey seed: the Ed25519 private seed and the public key type prefix."""

    seed: bytes
    public_prefix: int

    @classmethod
    def decode(cls, text: str) -> NKeySeed:
        try:
            raw = _b32decode(text)
        except (binascii.Error, ValueError) as exc:
            raise NatsError("nats: invalid nkey seed") from exc
        if len(raw) != 36 or _crc16(raw[:-2]) != int.from_bytes(raw[-2:], "little"):
            raise NatsError("nats: invalid nkey seed")
        if raw[0] & 0xF8 != _PREFIX_SEED:
            raise NatsError("nats: invalid nkey seed")
        public_prefix = ((raw[0] & 0x07) << 5) | ((raw[1] & 0xF8) >> 3)
        return cls(seed=raw[2:34], public_prefix=public_prefix)

    @classmethod
    def generate_user(cls, seed: bytes) -> NKeySeed:
        """A user seed from 32 random bytes (for tests and tooling)."""
        return cls(seed=seed, public_prefix=_PREFIX_USER)

    def encode(self) -> str:
        b0 = _PREFIX_SEED | (self.public_prefix >> 5)
        b1 = (self.public_prefix & 0x1F) << 3
        return _b32encode(_with_crc(bytes([b0, b1]) + self.seed))

    def public_key(self) -> str:
        raw = _private_key(self.seed).public_key().public_bytes_raw()
        return _b32encode(_with_crc(bytes([self.public_prefix]) + raw))

    def sign(self, nonce: str) -> str:
        signature = _private_key(self.seed).sign(nonce.encode())
        return base64.urlsafe_b64encode(signature).decode().rstrip("=")


def _private_key(seed: bytes) -> Ed25519PrivateKey:
    # Imported here: cryptography's key modules (and bcrypt, which they import) take
    # about 6 MB of every server's memory, and only NKey authentication needs them.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(seed)


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise NatsError(f"nats: error reading {what} {path}: {exc.strerror}") from exc


def _seed_from_text(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("S") and len(line) > 50 and line.isalnum():
            return line
    raise NatsError("nats: no nkey seed found")


def parse_credentials(text: str) -> tuple[str, str]:
    """(user JWT, seed) from a ``.creds`` file: the values of the first two BEGIN blocks."""
    blocks: list[str] = []
    expecting = False
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if line.startswith("---"):
            expecting = "BEGIN" in line
        elif expecting and line:
            blocks.append(line)
            expecting = False
    if len(blocks) < 2:
        raise NatsError("nats: invalid credentials file")
    return blocks[0], blocks[1]


@dataclass(frozen=True)
class Credentials:
    """What goes into CONNECT for authentication (besides URL-embedded user/token)."""

    user: str = ""
    password: str = ""
    token: str = ""
    credentials_file: str = ""
    nkey_seed_file: str = ""

    def connect_fields(self, nonce: str) -> dict[str, str]:
        fields: dict[str, str] = {}
        if self.user:
            fields["user"] = self.user
            fields["pass"] = self.password
        if self.token:
            fields["auth_token"] = self.token
        if self.credentials_file:
            jwt, seed_text = parse_credentials(_read(self.credentials_file, "credentials"))
            seed = NKeySeed.decode(seed_text)
            fields["jwt"] = jwt
            fields["sig"] = seed.sign(nonce)
        elif self.nkey_seed_file:
            seed = NKeySeed.decode(_seed_from_text(_read(self.nkey_seed_file, "nkey seed")))
            fields["nkey"] = seed.public_key()
            fields["sig"] = seed.sign(nonce)
        return fields
