"""Positions in configuration text and the one error type of the config language."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Position:
    """A place in a configuration source: 1-based line and column (in characters).

    Line 0 / column 0 designates a file as a whole (e.g. a top-level file that cannot be
    read). Tabs count as one column.
    """

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class ConfError(Exception):
    """Every failure of the config language: a message tied to a position."""

    pos: Position
    message: str

    def __init__(self, pos: Position, message: str) -> None:
        super().__init__(pos, message)
        self.pos = pos
        self.message = message

    def __str__(self) -> str:
        return f"{self.pos}: {self.message}"
