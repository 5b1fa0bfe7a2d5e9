"""Options of the table: store limits (``store_limits``), server-wide and per channel."""

from __future__ import annotations

from stanpkg.plan.options.core import Kind, Option, limit_option

OPTIONS: tuple[Option, ...] = (
    limit_option(
        "max_channels",
        Kind.INT,
        100,
        ("max_channels", "mc", "maxchannels"),
        ("-mc", "--max_channels"),
        "channels",
        "Max number of channels (0 for unlimited)",
    ),
    limit_option(
        "max_subs",
        Kind.INT,
        1000,
        ("max_subs", "msu", "max_subscriptions", "maxsubscriptions"),
        ("-msu", "--max_subs"),
        "subscriptions",
        "Max number of subscriptions per channel (0 for unlimited)",
    ),
    limit_option(
        "max_msgs",
        Kind.INT,
        1_000_000,
        ("max_msgs", "mm", "maxmsgs", "max_count", "maxcount"),
        ("-mm", "--max_msgs"),
        "messages",
        "Max number of messages per channel (0 for unlimited)",
    ),
    limit_option(
        "max_bytes",
        Kind.SIZE,
        1_024_000_000,
        ("max_bytes", "mb", "maxbytes"),
        ("-mb", "--max_bytes"),
        "bytes",
        "Max messages total size per channel (0 for unlimited)",
    ),
    limit_option(
        "max_age",
        Kind.DURATION,
        0,
        ("max_age", "ma", "maxage"),
        ("-ma", "--max_age"),
        "age",
        'Max duration a message can be stored ("0s" for unlimited)',
    ),
    limit_option(
        "max_inactivity",
        Kind.DURATION,
        0,
        ("max_inactivity", "mi", "maxinactivity"),
        ("-mi", "--max_inactivity"),
        "inactivity",
        "Max inactivity (no new message, no subscription) after which a channel can be "
        "garbage collected (0 for unlimited)",
    ),
)
