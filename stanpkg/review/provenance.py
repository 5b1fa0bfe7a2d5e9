"""Where a value of a plan was set: a file position, a flag, an environment variable or
the default. ``stanpkg diff`` names it for each new value, and ``--against`` puts its
warnings on the line that sets the limit.

A channel's limit may be inherited: it was set by the channel's own entry, else by the
entry it inherits from (``ChannelLimits.parent_name``, the chain the plan's inheritance
resolved), and so on up to the global limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from stanpkg.conf import Position
from stanpkg.plan.context import dotted
from stanpkg.plan.model import Plan, Source


@dataclass(frozen=True)
class SetAt:
    kind: str  # "file" | "flag" | "env" | "default"
    where: str = ""  # "stan.conf:3:5", "-mm", "NATS_STREAMING_ENCRYPTION_KEY", ""

    @classmethod
    def of(cls, source: Source | None) -> SetAt:
        return cls("default") if source is None else cls(source.kind, source.where)

    @property
    def position(self) -> Position | None:
        if self.kind != "file":
            return None
        file, _, rest = self.where.rpartition(":")
        file, _, line = file.rpartition(":")
        if not (file and line.isdigit() and rest.isdigit()):
            return None
        return Position(file, int(line), int(rest))

    def __str__(self) -> str:
        match self.kind:
            case "default":
                return "default"
            case "file":
                return self.where or "file"
            case "flag":
                return f"flag {self.where}"
            case "env":
                return f"environment {self.where}"
        return f"{self.kind} {self.where}".strip()

    def as_json(self) -> dict[str, object]:
        pos = self.position
        if pos is not None:
            return {"file": pos.file, "line": pos.line, "column": pos.col}
        out: dict[str, object] = {"source": self.kind}
        if self.where:
            out["where"] = self.where
        return out


def option_set_at(plan: Plan, path: str) -> SetAt:
    return SetAt.of(plan.provenance.get(path))


def limit_set_at(plan: Plan, entry: str | None, limit: str) -> SetAt:
    """Where the value of ``limit`` that per-channel entry ``entry`` (None: the global
    limits) resolves to was set."""
    entries = {channel.name: channel for channel in plan.store_limits.channels}
    name = entry or ""
    while name:
        source = plan.provenance.get(dotted(("store_limits", "channels", name, limit)))
        if source is not None:
            return SetAt.of(source)
        name = entries[name].parent_name if name in entries else ""
    return option_set_at(plan, f"store_limits.{limit}")


def channel_limit_set_at(plan: Plan, channel: str, limit: str) -> SetAt:
    """Where the limit a channel (or entry name) gets in ``plan`` was set."""
    entry = plan.store_limits.entry_for(channel)
    return limit_set_at(plan, None if entry is None else entry.name, limit)
