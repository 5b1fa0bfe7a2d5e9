"""Decoding the store's rows, shared by recovery (which also writes) and the read-only
snapshot: an undecodable row is a :class:`StoreError` naming its table and row."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from google.protobuf.message import DecodeError

from stanpkg.stores.base import StoreError
from stanpkg.stores.sql.pending import decode_seqs

__all__ = ["decoded", "pending_lists"]

_T = TypeVar("_T")


def decoded(row: str, decode: Callable[[], _T]) -> _T:
    """A row's columns decoded, or the StoreError that names the row: a garbage row
    (a bad restore, another program) stops the start cleanly instead of a traceback."""
    try:
        return decode()
    except (DecodeError, ValueError, TypeError) as exc:
        raise StoreError(f"sql: unable to decode {row}: {exc}") from None


def pending_lists(pending: bytes | None, acks: bytes | None) -> tuple[list[int], list[int]]:
    """The sequences a ``SubsPending`` row lists as pending, and its acks."""
    return decode_seqs(pending), decode_seqs(acks)
