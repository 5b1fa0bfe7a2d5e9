"""Where a channel's messages are in its shared stream, by runs of sequences.

A batch's messages get consecutive stream sequences and its answer gives the last one's
(``channel_log``), so a channel's STAN sequences map onto the stream in runs. Its own
module: it runs for every message a serving node writes, so it is compiled
(``hot_path``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Sequence

__all__ = ["MAX_RUNS", "StreamPositions"]

MAX_RUNS = 4096  # runs of positions a channel remembers (24 bytes each)


class StreamPositions:
    """Where a channel's messages are in its stream, by runs: consecutive STAN sequences
    at consecutive stream sequences (lone messages of one atomic batch; runs that follow
    each other in both are merged), or a pack's, all at one stream sequence. Runs below
    the channel's first message are dropped."""

    __slots__ = ("_counts", "_sequences", "_steps", "_stream_seqs")

    def __init__(self) -> None:
        self._sequences = array("q")  # each run's first STAN sequence
        self._stream_seqs = array("q")  # and its stream sequence
        self._counts = array("q")
        self._steps = array("b")  # 1: a message per stream sequence; 0: a pack

    def add(self, sequence: int, stream_seq: int, count: int = 1, *, packed: bool = False) -> None:
        """STAN sequences ``sequence`` .. + count - 1 at stream sequences ``stream_seq`` ...
        (``packed``: all at ``stream_seq``)."""
        step = 0 if packed else 1
        if self._counts and self._sequences[-1] + self._counts[-1] == sequence:
            # Merged when it is where the run's next message would be. A lone message
            # fits either kind of run, and a run of one message is of either kind.
            before, kind = self._counts[-1], self._steps[-1]
            if before == 1 and stream_seq - self._stream_seqs[-1] in (0, 1):
                kind = stream_seq - self._stream_seqs[-1]
            if stream_seq == self._stream_seqs[-1] + before * kind and (count == 1 or step == kind):
                self._steps[-1] = kind
                self._counts[-1] += count
                return
        if len(self._counts) >= MAX_RUNS:
            # Bounded: memory must not grow with the messages written. The older half is
            # forgotten; a read or purge there finds its place in the stream by a search.
            self._drop(MAX_RUNS // 2)
        self._sequences.append(sequence)
        self._stream_seqs.append(stream_seq)
        self._counts.append(count)
        self._steps.append(step)

    def add_runs(self, sequence: int, last_stream_seq: int, runs: Sequence[int]) -> None:
        """The stream messages of one atomic batch, ``runs`` STAN messages each (1: a lone
        message, more: a pack) from ``sequence``, the last at ``last_stream_seq``."""
        stream_seq = last_stream_seq - len(runs) + 1
        for count in runs:
            self.add(sequence, stream_seq, count, packed=count > 1)
            sequence += count
            stream_seq += 1

    def stream_seqs(self, sequence: int, count: int) -> list[int]:
        """The stream sequences of STAN sequences ``sequence`` .. + count - 1; empty when
        one of them is not known."""
        found: list[int] = []
        index = bisect_right(self._sequences, sequence) - 1
        end = sequence + count
        while sequence < end:
            if index < 0 or index >= len(self._counts):
                return []
            first = self._sequences[index]
            run_end = first + self._counts[index]
            if not first <= sequence < run_end:
                return []
            base, step = self._stream_seqs[index], self._steps[index]
            upto = min(run_end, end)
            if step:
                found += range(base + sequence - first, base + upto - first)
            else:
                found += [base] * (upto - sequence)
            sequence = upto
            index += 1
        return found

    def stream_seq(self, sequence: int) -> int:
        """The stream sequence of STAN sequence ``sequence``; 0 when it is not known."""
        index = bisect_right(self._sequences, sequence) - 1
        if index < 0 or sequence >= self._sequences[index] + self._counts[index]:
            return 0
        return self._stream_seqs[index] + (sequence - self._sequences[index]) * self._steps[index]

    def drop_below(self, sequence: int) -> None:
        """Forget the runs that end below STAN sequence ``sequence``."""
        index = bisect_right(self._sequences, sequence) - 1
        if index < 0:
            return
        if sequence >= self._sequences[index] + self._counts[index]:
            index += 1
        if index:
            self._drop(index)

    def _drop(self, runs: int) -> None:
        del self._sequences[:runs]
        del self._stream_seqs[:runs]
        del self._counts[:runs]
        del self._steps[:runs]

    def clear(self) -> None:
        self.drop_below(2**62)

    def __len__(self) -> int:
        return len(self._counts)
