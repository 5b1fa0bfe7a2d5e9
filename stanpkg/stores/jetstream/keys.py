"""Keys of the cluster's records and tokens of its subjects: KV keys (and so subject tokens)
allow only ``[-/_=.a-zA-Z0-9]`` while client IDs, channel names and cluster IDs may hold
any character. :func:`kv_key` encodes the parts of a key reversibly."""

from __future__ import annotations

import base64
import re

__all__ = ["checked_key", "kv_key", "kv_key_parts"]

_PLAIN = re.compile(r"[a-zA-Z0-9][-_a-zA-Z0-9]*")  # kept as is, for readable keys
_VALID_KEY = re.compile(r"[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*")
_ENCODED = "="  # marks a base64url part; never the first character of a plain part


def kv_key(*parts: str) -> str:
    """A valid KV key for any strings: plain parts as they are, the others (and empty
    ones) as ``=`` + base64url, joined by '.'."""
    if not parts:
        raise ValueError("a KV key needs at least one part")
    return ".".join(part if _PLAIN.fullmatch(part) else _encode(part) for part in parts)


def kv_key_parts(key: str) -> tuple[str, ...]:
    """The inverse of :func:`kv_key`."""
    return tuple(
        _decode(token) if token.startswith(_ENCODED) else token for token in key.split(".")
    )


def checked_key(key: str) -> str:
    """Keys become subjects: a bad one would write elsewhere or fail the whole batch."""
    if not _VALID_KEY.fullmatch(key):
        raise ValueError(f"invalid KV key {key!r} (make keys with kv_key)")
    return key


def _encode(part: str) -> str:
    return _ENCODED + base64.urlsafe_b64encode(part.encode()).decode().rstrip("=")


def _decode(token: str) -> str:
    raw = token[len(_ENCODED) :]
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
