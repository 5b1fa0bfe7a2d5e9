"""A diagnostic with the configuration file it belongs to: what the review formats show.

A diagnostic caused by a flag or the environment has no position; review tools still
need a file to hang it on, so it is shown on the configuration file it was checked with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from stanpkg.plan.diagnostics import Diagnostic, Severity, rule_description


@dataclass(frozen=True)
class Finding:
    diagnostic: Diagnostic
    file: str = ""  # the configuration file checked ("" when none)

    @property
    def code(self) -> str:
        return self.diagnostic.code or "config"

    @property
    def title(self) -> str:
        return rule_description(self.diagnostic.code)

    @property
    def is_error(self) -> bool:
        return self.diagnostic.severity is Severity.ERROR

    @property
    def path(self) -> str:
        """The file the diagnostic is shown in: its own position's (an included file's
        own path when the problem is in an include), else the configuration file."""
        pos = self.diagnostic.pos
        return pos.file if pos is not None and pos.file else self.file

    @property
    def line(self) -> int:
        """1-based; 0 when the diagnostic has no line (the file as a whole)."""
        pos = self.diagnostic.pos
        return pos.line if pos is not None and pos.line > 0 else 0

    @property
    def column(self) -> int:
        pos = self.diagnostic.pos
        return pos.col if pos is not None and pos.line > 0 and pos.col > 0 else 0

    @property
    def message(self) -> str:
        """The message, led by the flag or variable that caused it when it has no
        position (``-mm: ...``), as the text output shows it."""
        diag = self.diagnostic
        if diag.pos is None and diag.where and diag.where != self.path:
            return f"{diag.where}: {diag.message}"
        return diag.message


def strict_view(diagnostics: Iterable[Diagnostic], on: bool) -> tuple[Diagnostic, ...]:
    """``--strict``: warnings become errors."""
    if not on:
        return tuple(diagnostics)
    return tuple(
        replace(d, severity=Severity.ERROR) if d.severity is Severity.WARNING else d
        for d in diagnostics
    )


def findings(diagnostics: Sequence[Diagnostic], file: str) -> list[Finding]:
    return [Finding(d, file) for d in diagnostics]
