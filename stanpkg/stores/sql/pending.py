"""A subscription's ``SubsPending`` rows in caching mode, mirrored in memory.

Row format (the reference's): ``(subid, row, seq=0, lastsent, pending, acks)`` where
``pending`` and ``acks`` are JSON arrays of sequences. Reading a subscription's rows in
``row`` order: each row's ``pending`` become pending, then each of its ``acks`` removes a
sequence that is pending. A row with ``seq > 0`` (written in write-through mode) makes
that one sequence pending.

Each flush writes at most one new row per subscription (more only past
:data:`MAX_PER_ROW` sequences): the sequences sent since the last flush and the acks of
sequences that earlier rows hold; a sequence sent and acked between two flushes is never
written. A row is deleted once none of its sequences is pending and none of its acks is
still needed, where an ack is needed while the row listing that sequence exists. A message
never acknowledged would keep the rows after it alive, so past :data:`COMPACT_ROWS` rows
the subscription's rows are rewritten as its pending sequences alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["COMPACT_ROWS", "MAX_PER_ROW", "Row", "SubPending", "Write", "decode_seqs"]

MAX_PER_ROW = 2000  # sequences per JSON column, and unflushed changes before a forced flush
COMPACT_ROWS = 64

# ("del_row", row) | ("del_all",) | ("row", row, last_sent, pending, acks) | ("last_sent", n)
Write = tuple[object, ...]


def encode_seqs(seqs: Sequence[int]) -> bytes | None:
    return json.dumps(list(seqs), separators=(",", ":")).encode() if seqs else None


def decode_seqs(data: bytes | memoryview | None) -> list[int]:
    if not data:
        return []
    value = json.loads(bytes(data))
    return [int(v) for v in value] if isinstance(value, list) else []


@dataclass(slots=True, eq=False)
class Row:
    id: int
    listed: list[int]  # the sequences the row lists as pending
    last_sent: int = 0
    live: set[int] = field(default_factory=set)  # ... and not acknowledged since
    acks: set[int] = field(default_factory=set)  # its acks that are still needed


class SubPending:
    def __init__(self, sub_id: int, last_sent: int = 0) -> None:
        """``last_sent``: what the subscription's ``lastsent`` column holds."""
        self.sub_id = sub_id
        self.last_sent = last_sent
        self.column_last_sent = last_sent
        self.flushed_last_sent = last_sent
        self.rows: dict[int, Row] = {}
        self.where: dict[int, Row] = {}  # pending sequence → the row listing it
        self.ack_where: dict[int, Row] = {}  # acknowledged sequence → row holding the ack
        self.new_pending: set[int] = set()
        self.new_acks: set[int] = set()
        self.dropped: list[int] = []

    # -- changes -------------------------------------------------------------------------

    def sent(self, seq: int) -> int:
        """Returns how many changes wait for a flush."""
        self.new_pending.add(seq)
        self.last_sent = max(self.last_sent, seq)
        return len(self.new_pending)

    def acked(self, seq: int) -> int:
        if seq in self.new_pending:
            self.new_pending.discard(seq)
        else:
            row = self.where.pop(seq, None)
            if row is not None:
                row.live.discard(seq)
                self.new_acks.add(seq)
                if not row.live and not row.acks:
                    self._drop(row)
        return len(self.new_acks)

    @property
    def dirty(self) -> bool:
        return bool(
            self.new_pending
            or self.new_acks
            or self.dropped
            or self.last_sent != self.flushed_last_sent
        )

    def pending(self) -> list[int]:
        return sorted(self.where.keys() | self.new_pending)

    def _drop(self, row: Row) -> None:
        """Forget a row whose sequences are all acknowledged; the acks of those
        sequences are no longer needed, which may free the rows holding them."""
        stack = [row]
        while stack:
            current = stack.pop()
            if self.rows.pop(current.id, None) is None:
                continue
            self.dropped.append(current.id)
            for seq in current.listed:
                if seq in self.new_acks:
                    self.new_acks.discard(seq)
                    continue
                holder = self.ack_where.pop(seq, None)
                if holder is not None:
                    holder.acks.discard(seq)
                    if not holder.acks and not holder.live:
                        stack.append(holder)

    # -- recovery ------------------------------------------------------------------------

    def load(
        self, row_id: int, seq: int, last_sent: int, pending: list[int], acks: Iterable[int]
    ) -> None:
        """Replay one stored row (rows in ``row`` order)."""
        listed = [seq] if seq > 0 else pending
        row = Row(row_id, listed, max(last_sent, seq))
        self.last_sent = max(self.last_sent, row.last_sent, *listed)
        for s in listed:
            previous = self.where.get(s)
            if previous is not None:
                previous.live.discard(s)
            self.where[s] = row
            row.live.add(s)
        for s in acks:
            holder = self.where.pop(s, None)
            if holder is not None:
                holder.live.discard(s)
                row.acks.add(s)
                self.ack_where[s] = row
        self.rows[row_id] = row

    def finish_load(self) -> None:
        for row in list(self.rows.values()):
            if not row.live and not row.acks:
                self._drop(row)
        self.flushed_last_sent = self.last_sent

    # -- flush ---------------------------------------------------------------------------

    def flush(self, next_row: Callable[[], int]) -> list[Write]:
        """The writes that bring the stored rows up to date; the mirror assumes they
        will be committed. The largest sequence sent must survive in a row's or the
        subscription's ``lastsent`` column, even once every row is gone."""
        writes: list[Write] = [("del_row", row_id) for row_id in self.dropped]
        self.dropped = []
        if self.new_pending or self.new_acks:
            if len(self.rows) >= COMPACT_ROWS:  # rewrite: the pending sequences alone
                pending, acks = self.pending(), []
                writes.append(("del_all",))
                self.rows, self.where, self.ack_where = {}, {}, {}
            else:
                pending, acks = sorted(self.new_pending), sorted(self.new_acks)
            self.new_pending, self.new_acks = set(), set()
            for start in range(0, max(len(pending), len(acks)), MAX_PER_ROW):
                writes.append(
                    self._new_row(
                        next_row(),
                        pending[start : start + MAX_PER_ROW],
                        acks[start : start + MAX_PER_ROW],
                    )
                )
        stored = max((row.last_sent for row in self.rows.values()), default=0)
        if max(stored, self.column_last_sent) < self.last_sent:
            writes.append(("last_sent", self.last_sent))
            self.column_last_sent = self.last_sent
        self.flushed_last_sent = self.last_sent
        return writes

    def _new_row(self, row_id: int, pending: list[int], acks: list[int]) -> Write:
        row = Row(row_id, pending, self.last_sent, set(pending), set(acks))
        for s in pending:
            self.where[s] = row
        for s in acks:
            self.ack_where[s] = row
        self.rows[row_id] = row
        return ("row", row_id, self.last_sent, encode_seqs(pending), encode_seqs(acks))
