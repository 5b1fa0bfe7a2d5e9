"""``stanpkg validate --against URL NEW``: what NEW would remove from the data a running
server holds, at its next start, channel by channel.

Read from the server's monitoring endpoints (and, for message ages, as a STAN client):
messages over NEW's ``max_msgs`` or ``max_bytes`` or older than its ``max_age``,
subscriptions over ``max_subs``, channels over ``max_channels``, channels NEW's
partitioning no longer serves, and data a different store (or cluster ID) would not
find. Each is a warning (``--strict``: an error) naming the channel and the count, placed
where NEW sets the limit concerned, so a review tool shows it on that line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stanpkg.plan.diagnostics import Diagnostic, warning
from stanpkg.plan.limits import Limits
from stanpkg.plan.model import Plan, StoreType
from stanpkg.plan.redact import redact_urls
from stanpkg.review.ages import AgeAnswers, AgeQuestion
from stanpkg.review.live import LiveChannel, LiveServer
from stanpkg.review.provenance import SetAt, channel_limit_set_at, option_set_at
from stanpkg.review.values import limit_text

AgeProbe = Callable[[Plan, str, str, Sequence[AgeQuestion]], AgeAnswers]


@dataclass(frozen=True)
class AgainstResult:
    live: LiveServer
    diagnostics: tuple[Diagnostic, ...]
    ages_counted: bool  # False: the message ages could not be asked (``age_problem`` says why)
    age_problem: str = ""

    @property
    def summary(self) -> str:
        msgs = sum(c.msgs for c in self.live.channels)
        return (
            f"against {redact_urls(self.live.url)}: "
            f"{_plural(len(self.live.channels), 'channel')}, {_plural(msgs, 'message')}: "
            f"{_plural(len(self.diagnostics), 'change')} to stored data at the next start"
        )


def _at(set_at: SetAt, code: str, message: str) -> Diagnostic:
    """A warning on the line that sets the value (or naming the flag or variable)."""
    pos = set_at.position
    where = "" if pos is not None or set_at.kind == "default" else str(set_at)
    return warning(message, pos, where=where, code=code)


def _setting(limit: str, value: int, set_at: SetAt) -> str:
    shown = f"{limit} {limit_text(limit, value)}"
    return f"{shown}, the default" if set_at.kind == "default" else shown


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _channel_findings(
    plan: Plan, channel: LiveChannel, limits: Limits, ages: AgeAnswers
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    name = channel.name

    def at(limit: str) -> SetAt:
        return channel_limit_set_at(plan, name, limit)

    stored = _plural(channel.msgs, "message")
    if 0 < limits.max_msgs < channel.msgs:
        over = channel.msgs - limits.max_msgs
        out.append(
            _at(
                at("max_msgs"),
                "live-messages",
                f'channel "{name}": {over} of its {stored} would be removed at the next start '
                f"({_setting('max_msgs', limits.max_msgs, at('max_msgs'))})",
            )
        )
    if 0 < limits.max_bytes < channel.bytes and channel.msgs:
        excess = channel.bytes - limits.max_bytes
        average = channel.bytes / channel.msgs
        about = min(channel.msgs, max(1, -(-excess // max(1, round(average)))))
        out.append(
            _at(
                at("max_bytes"),
                "live-messages",
                f'channel "{name}": about {about} of its {stored} ({channel.bytes} bytes, '
                f"{excess} over the limit) would be removed at the next start "
                f"({_setting('max_bytes', limits.max_bytes, at('max_bytes'))})",
            )
        )
    if limits.max_age > 0 and channel.msgs:
        age = _setting("max_age", limits.max_age, at("max_age"))
        if name in ages.older:
            older = ages.older[name]
            if older:
                out.append(
                    _at(
                        at("max_age"),
                        "live-messages",
                        f'channel "{name}": {older} of its {stored} are older than '
                        f"{limit_text('max_age', limits.max_age)} and would be removed at the "
                        f"next start ({age})",
                    )
                )
        else:
            why = ages.problems.get(name) or ages.error
            out.append(
                _at(
                    at("max_age"),
                    "live-messages",
                    f'channel "{name}": its messages older than '
                    f"{limit_text('max_age', limits.max_age)} would be removed at the next start "
                    f"({age}); how many of its {stored} is not known: {why}",
                )
            )
    if 0 < limits.max_subs < channel.subs_count:
        out.append(
            _at(
                at("max_subs"),
                "live-subscriptions",
                f'channel "{name}" has {_plural(channel.subs_count, "subscription")}, '
                f"{channel.subs_count - limits.max_subs} over the limit: they are kept, but "
                "no new subscription is accepted until fewer remain "
                f"({_setting('max_subs', limits.max_subs, at('max_subs'))})",
            )
        )
    if plan.partitioning and plan.store_limits.entry_for(name) is None:
        out.append(
            _at(
                option_set_at(plan, "partitioning"),
                "live-partitioning",
                f'channel "{name}" ({stored}, '
                f"{_plural(channel.subs_count, 'subscription')}) is not in the partitioning "
                "list (store_limits.channels): this server would no longer serve it",
            )
        )
    return out


def _server_findings(plan: Plan, live: LiveServer) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    channels, msgs = len(live.channels), sum(c.msgs for c in live.channels)
    max_channels = plan.store_limits.max_channels
    if 0 < max_channels < channels:
        set_at = option_set_at(plan, "store_limits.max_channels")
        out.append(
            _at(
                set_at,
                "live-channels",
                f"the server holds {channels} channels, {channels - max_channels} over the "
                "limit: they are kept, but no new channel is created until fewer remain "
                f"({_setting('max_channels', max_channels, set_at)})",
            )
        )
    store_at = option_set_at(plan, "store_type")
    if live.store_type and live.store_type != plan.store_label and msgs:
        out.append(
            _at(
                store_at,
                "live-store",
                f"the running server keeps {_plural(msgs, 'message')} in {channels} channels "
                f"in its {live.store_type} store; the {plan.store_label} store of this "
                "configuration does not hold them",
            )
        )
    elif live.store_type == StoreType.MEMORY.value and msgs:
        out.append(
            _at(
                store_at,
                "live-store",
                f"the running server keeps its {_plural(msgs, 'message')} in memory "
                "(MEMORY store): all of them are lost when it restarts, whatever the "
                "configuration",
            )
        )
    if live.cluster_id and live.cluster_id != plan.cluster_id:
        out.append(
            _at(
                option_set_at(plan, "cluster_id"),
                "live-store",
                f'the running server serves cluster ID "{live.cluster_id}", this '
                f'configuration "{plan.cluster_id}": clients of "{live.cluster_id}" would '
                "not reach it, and a FILE or SQL store refuses to start (cluster ID does "
                "not match recovered value)",
            )
        )
    return out


def age_questions(plan: Plan, live: LiveServer) -> list[AgeQuestion]:
    questions = []
    for channel in live.channels:
        max_age = plan.store_limits.for_channel(channel.name).max_age
        if max_age > 0 and channel.msgs:
            questions.append(AgeQuestion(channel.name, channel.first_seq, channel.msgs, max_age))
    return questions


def nats_url_for(plan: Plan, live: LiveServer, given: str) -> str:
    """Where the running server's clients connect: ``--against-nats``, else NEW's
    external NATS server, else the embedded one's port (from ``/varz``) on the
    monitoring URL's host."""
    if given:
        return given
    if plan.nats_server_url:
        return plan.nats_server_url
    if live.nats_port:
        host = live.host
        return (
            f"nats://[{host}]:{live.nats_port}"
            if ":" in host
            else f"nats://{host}:{live.nats_port}"
        )
    return ""


def check_against(
    plan: Plan, live: LiveServer, nats_url: str = "", probe: AgeProbe | None = None
) -> AgainstResult:
    """NEW's warnings about ``live``'s data; ``probe`` answers the age questions (by
    default as a STAN client of the running server)."""
    if probe is None:
        from stanpkg.review.age_probe import probe_ages  # the STAN client, only when asked

        probe = probe_ages
    questions = age_questions(plan, live)
    url = nats_url_for(plan, live, nats_url)
    if not questions:
        ages = AgeAnswers({}, {})
    elif not url:
        ages = AgeAnswers(
            {}, {}, "the NATS URL of the running server is not known (give --against-nats URL)"
        )
    else:
        ages = probe(plan, url, live.cluster_id, questions)
    found = _server_findings(plan, live)
    for channel in live.channels:
        limits = plan.store_limits.for_channel(channel.name)
        found += _channel_findings(plan, channel, limits, ages)
    return AgainstResult(live, tuple(found), not ages.error, ages.error)
