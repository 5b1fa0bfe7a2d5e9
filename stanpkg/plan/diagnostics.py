"""Diagnostics: compiler-style errors and warnings, values rather than exceptions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from stanpkg.conf import Position


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    message: str
    pos: Position | None = None
    where: str = ""  # when there is no file position: a flag ("-mm") or variable name
    code: str = ""  # stable identifier for tools: "unknown-key", "type", "range", ...

    def __str__(self) -> str:
        if self.pos is not None:
            prefix = f"{self.pos}: "
        elif self.where:
            prefix = f"{self.where}: "
        else:
            prefix = ""
        return f"{prefix}{self.severity.value}: {self.message}"

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"severity": self.severity.value, "message": self.message}
        if self.code:
            out["code"] = self.code
        if self.pos is not None:
            out.update(file=self.pos.file, line=self.pos.line, column=self.pos.col)
        elif self.where:
            out["source"] = self.where
        return out


def error(
    message: str, pos: Position | None = None, *, where: str = "", code: str = ""
) -> Diagnostic:
    return Diagnostic(Severity.ERROR, message, pos, where, code)


def warning(
    message: str, pos: Position | None = None, *, where: str = "", code: str = ""
) -> Diagnostic:
    return Diagnostic(Severity.WARNING, message, pos, where, code)


def has_errors(diags: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diags)
