"""Diagnostics: compiler-style errors and warnings, values rather than exceptions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from stanpkg.conf import Position


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


# Every diagnostic code, with what it is about: the rules a review tool lists once
# (SARIF's ``tool.driver.rules``, the title of a GitHub annotation, GitLab's check name).
# A test checks that every code written in stanpkg is here.
RULES: dict[str, str] = {
    "syntax": "The configuration text does not parse",
    "file": "A file cannot be read, or a named file is missing or unreadable",
    "directory": "A directory the server writes is not writable or creatable",
    "type": "A value has the wrong type",
    "range": "A value is out of its range",
    "value": "A value is not one of the allowed values",
    "schema": "A value breaks the configuration schema",
    "duration": "A duration does not parse",
    "invalid-value": "A value is not usable as given",
    "unknown-key": "Unknown option (ignored by the server)",
    "duplicate": "An option or channel is set twice (the last one wins)",
    "ambiguous": "A key could be a streaming or a NATS option",
    "channel-name": "A channel name is not a valid subject",
    "too-many-channels": "More channels are configured than max_channels allows",
    "missing-dir": "The FILE store needs a directory",
    "unused": "An option has no effect with this configuration",
    "slice-limit": "A file slice limit is larger than the channel limit",
    "sql-driver": "The SQL driver is missing or unknown",
    "sql-source": "The SQL data source is missing or malformed",
    "mode": "Options of the serving modes do not combine",
    "ft-nats": "A fault-tolerant group cannot hear its heartbeats",
    "jetstream": "A clustering option is managed by JetStream and ignored",
    "peers": "Cluster peers are written as one string",
    "raft": "Raft timeouts are inconsistent",
    "encryption-key": "Encryption is on without a key",
    "tls": "TLS options are incomplete",
    "nats": "The NATS server rejects an option passed to it",
    "live-messages": "Stored messages the new limits would remove",
    "live-subscriptions": "A channel holds more subscriptions than the new max_subs",
    "live-channels": "The server holds more channels than the new max_channels",
    "live-partitioning": "A stored channel the new partitioning no longer serves",
    "live-store": "The running server's data the new store would not hold",
}


def rule_description(code: str) -> str:
    return RULES.get(code, "Configuration problem")


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
