"""``stanpkg diff``'s output: text for people, JSON for tools, and the exit status."""

from __future__ import annotations

from typing import Any

from stanpkg.review.diff import ChannelChange, PlanDiff

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_INVALID, EXIT_DANGEROUS = 0, 1, 2, 3
DANGER = "can drop data"


def exit_status(diff: PlanDiff) -> int:
    if diff.equal:
        return EXIT_EQUAL
    return EXIT_DANGEROUS if diff.dangers else EXIT_DIFFERENT


def _channel_head(change: ChannelChange) -> str:
    if change.in_old and not change.in_new:
        return f'channel "{change.channel}" (no longer configured: inherits)'
    if change.in_new and not change.in_old:
        return f'channel "{change.channel}" (newly configured)'
    return f'channel "{change.channel}"'


def diff_text(diff: PlanDiff, old_name: str, new_name: str) -> list[str]:
    if diff.equal:
        return [f"{old_name} and {new_name}: the plans are equal"]
    lines = []
    for opt in diff.options:
        lines.append(f"{opt.name}: {opt.old_text} -> {opt.new_text}  (set at {opt.set_at})")
        if opt.danger:
            lines.append(f"    {DANGER}: {opt.danger}")
    for channel in diff.channels:
        lines.append(_channel_head(channel) + ":")
        for limit in channel.limits:
            lines.append(
                f"    {limit.name}: {limit.old_text} -> {limit.new_text}  (set at {limit.set_at})"
            )
            if limit.danger:
                lines.append(f"        {DANGER}: {limit.danger}")
    for note in diff.notes:
        lines.append(note.text)
        if note.danger:
            lines.append(f"    {DANGER}: {note.danger}")
    count = len(diff.options) + sum(len(c.limits) for c in diff.channels) + len(diff.notes)
    dangers = len(diff.dangers)
    summary = f"{old_name} -> {new_name}: {count} change{'s' if count != 1 else ''}"
    if dangers:
        summary += f", {dangers} can drop stored data or subscriptions"
    lines.append(summary)
    return lines


def diff_json(diff: PlanDiff) -> dict[str, Any]:
    return {
        "equal": diff.equal,
        "dangerous": bool(diff.dangers),
        "options": [change.as_json("option") for change in diff.options],
        "channels": [
            {
                "channel": channel.channel,
                "configured_in_old": channel.in_old,
                "configured_in_new": channel.in_new,
                "limits": [limit.as_json("limit") for limit in channel.limits],
            }
            for channel in diff.channels
        ],
        "notes": [
            {"text": note.text, **({"danger": note.danger} if note.danger else {})}
            for note in diff.notes
        ],
    }
