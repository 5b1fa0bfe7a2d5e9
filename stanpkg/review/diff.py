"""``stanpkg diff OLD NEW``: what changes between two resolved plans, and which changes can
drop stored data or subscriptions.

Plans are compared, not texts: an option counts as changed when its resolved value
differs (whatever file, alias, flag or variable set it), a channel when its effective
limits (after inheritance) differ. Options are named by the table's paths; each new
value comes with where it was set.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from stanpkg.plan.limits import Limits
from stanpkg.plan.model import Plan, StoreType
from stanpkg.plan.options import OPTIONS, Option
from stanpkg.plan.subjects import is_literal
from stanpkg.review.provenance import SetAt, channel_limit_set_at, option_set_at
from stanpkg.review.values import (
    comparable,
    json_value,
    limit_text,
    limit_value,
    raw_value,
    text_value,
)

LIMITS = tuple(f.name for f in fields(Limits))
_PERSISTENT = (StoreType.FILE, StoreType.SQL)


@dataclass(frozen=True)
class ValueChange:
    name: str  # an option's path, or a per-channel limit ("max_msgs")
    old: object  # JSON-ready, secrets redacted
    new: object
    old_text: str
    new_text: str
    set_at: SetAt  # where NEW's value was set
    danger: str = ""  # why the change can drop stored data or subscriptions

    def as_json(self, key: str) -> dict[str, object]:
        out: dict[str, object] = {
            key: self.name,
            "old": self.old,
            "new": self.new,
            "old_text": self.old_text,
            "new_text": self.new_text,
            "set_at": self.set_at.as_json(),
        }
        if self.danger:
            out["danger"] = self.danger
        return out


@dataclass(frozen=True)
class ChannelChange:
    channel: str  # a per-channel entry's name (wildcards allowed) in OLD or NEW
    in_old: bool  # configured (an entry) in OLD
    in_new: bool
    limits: tuple[ValueChange, ...]


@dataclass(frozen=True)
class Note:
    """A change that is no single option: a channel partitioning no longer serves, the
    NATS-server-only options."""

    text: str
    danger: str = ""


@dataclass(frozen=True)
class PlanDiff:
    options: tuple[ValueChange, ...]
    channels: tuple[ChannelChange, ...]
    notes: tuple[Note, ...]

    @property
    def equal(self) -> bool:
        return not (self.options or self.channels or self.notes)

    @property
    def dangers(self) -> list[str]:
        found = [c.danger for c in self.options if c.danger]
        found += [c.danger for ch in self.channels for c in ch.limits if c.danger]
        return found + [n.danger for n in self.notes if n.danger]


def lowered(old: int, new: int) -> bool:
    """A limit where 0 means unlimited goes down."""
    return new > 0 and (old == 0 or new < old)


def _limit_danger(limit: str, who: str, old: int, new: int) -> str:
    if not lowered(old, new):
        return ""
    value = limit_text(limit, new)
    match limit:
        case "max_msgs":
            return f"{who} keeps at most {value} messages: older ones are removed at the next start"
        case "max_bytes":
            return (
                f"{who} keeps at most {value} of messages: older ones are removed at the next start"
            )
        case "max_age":
            return f"{who} keeps messages for {value}: older ones are removed at the next start"
        case "max_subs":
            return (
                f"{who} accepts no new subscription while it has {value} or more "
                "(too many subscriptions per channel)"
            )
        case "max_inactivity":
            return (
                f"{who} is deleted, with its messages, after {value} without a subscription "
                "or a new message"
            )
    return ""


def _who(channel: str) -> str:
    return f'channel "{channel}"' if is_literal(channel) else f'every channel matching "{channel}"'


def _option_danger(opt: Option, old: Plan, new: Plan) -> str:
    """Why changing ``opt`` from OLD's to NEW's value can drop data ("" when it cannot)."""
    before, after = comparable(raw_value(old, opt)), comparable(raw_value(new, opt))
    if opt.section == "store_limits":
        assert isinstance(before, int) and isinstance(after, int)
        if opt.name == "max_channels":
            if lowered(before, after):
                return (
                    f"with {after} channels or more, the server creates no new channel "
                    "(too many channels)"
                )
            return ""
        return _limit_danger(opt.name, "a channel without its own limit", before, after)
    persistent = old.store_type in _PERSISTENT
    match opt.path:
        case "store_type":
            return (
                f"the messages, subscriptions and clients the {before} store holds are not in "
                f"the {after} store"
            )
        case "dir" if StoreType.FILE in (old.store_type, new.store_type):
            return f'the FILE store in "{after}" does not hold what was stored in "{before}"'
        case "sql_options.source" if StoreType.SQL in (old.store_type, new.store_type):
            return "the new SQL data source is another database: what the old one holds is not read"
        case "encrypt" if before and not after:
            return "messages stored encrypted are no longer decrypted"
        case "encryption_key" if old.encrypt and new.encrypt:
            return (
                "messages stored with the old key cannot be decrypted: a FILE or SQL store "
                "refuses to start (wrong encryption key?)"
            )
        case "cluster_id" if persistent or old.cluster.clustered:
            return (
                f'the store holds the data of cluster "{before}": the server refuses to start '
                f'as "{after}" (cluster ID does not match recovered value)'
            )
        case "cluster.clustered":
            return (
                "a clustered node keeps its data in JetStream, a standalone one in its store: "
                "what the other mode stored is not read"
            )
        case "partitioning" if after:
            served = ", ".join(f'"{c.name}"' for c in new.store_limits.channels) or "none"
            return (
                f"partitioning on: this server serves only the channels of "
                f"store_limits.channels ({served}); any other channel it stores is no "
                "longer served"
            )
        case "file_options.truncate_bad_eof" if after:
            return "a damaged last record of a file is cut off at the start instead of refused"
    return ""


def _option_changes(old: Plan, new: Plan) -> list[ValueChange]:
    changes = []
    for opt in OPTIONS:
        before, after = raw_value(old, opt), raw_value(new, opt)
        if comparable(before) == comparable(after):
            continue
        changes.append(
            ValueChange(
                opt.path,
                json_value(opt, before),
                json_value(opt, after),
                text_value(opt, before),
                text_value(opt, after),
                option_set_at(new, opt.path),
                _option_danger(opt, old, new),
            )
        )
    return changes


def _effective(plan: Plan, name: str) -> tuple[Limits, bool]:
    entries = {c.name: c.limits for c in plan.store_limits.channels}
    if name in entries:
        return entries[name], True
    return plan.store_limits.for_channel(name), False


def _channel_changes(old: Plan, new: Plan) -> list[ChannelChange]:
    names = [c.name for c in new.store_limits.channels]
    known = set(names)
    names += [c.name for c in old.store_limits.channels if c.name not in known]
    out = []
    for name in names:
        (before, in_old), (after, in_new) = _effective(old, name), _effective(new, name)
        changes = []
        for limit in LIMITS:
            was, now = limit_value(before, limit), limit_value(after, limit)
            if was == now:
                continue
            changes.append(
                ValueChange(
                    limit,
                    was,
                    now,
                    limit_text(limit, was),
                    limit_text(limit, now),
                    channel_limit_set_at(new, name, limit),
                    _limit_danger(limit, _who(name), was, now),
                )
            )
        if changes:
            out.append(ChannelChange(name, in_old, in_new, tuple(changes)))
    return out


def _partitioning_notes(old: Plan, new: Plan) -> list[Note]:
    """Both partitioned: the channels OLD served that NEW's list no longer covers."""
    if not (old.partitioning and new.partitioning):
        return []
    return [
        Note(
            f'channel "{c.name}" is no longer in the partitioning list',
            f'this server no longer serves "{c.name}" (partitioning): what it stores there '
            "is no longer served",
        )
        for c in old.store_limits.channels
        if new.store_limits.entry_for(c.name) is None
    ]


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    notes = _partitioning_notes(old, new)
    if old.nats_server.passthrough != new.nats_server.passthrough:
        notes.append(
            Note(
                "the NATS-server-only options changed (passed to nats-server as written; "
                "not shown, they may hold passwords)"
            )
        )
    return PlanDiff(
        tuple(_option_changes(old, new)), tuple(_channel_changes(old, new)), tuple(notes)
    )
