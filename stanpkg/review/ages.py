"""The question ``--against`` asks of a running server about message ages, and its
answers (``age_probe`` asks it as a STAN client)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgeQuestion:
    channel: str
    first_seq: int
    msgs: int
    max_age: int  # ns


@dataclass(frozen=True)
class AgeAnswers:
    older: dict[str, int]  # channel -> messages older than its max_age
    problems: dict[str, str]  # channel -> why its count is not known
    error: str = ""  # why no count is known at all (no connection)
