"""Options of the ``stan`` sink: ``df.write.format("stan")`` and
``df.writeStream.format("stan")``.

Parsed where the write is planned (the driver), into an immutable, picklable value that
every task receives. The connection options are the live source's (connection_options.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stanpkg.pipeline.connection_options import CONNECTION_OPTIONS, ConnectionOptions
from stanpkg.pipeline.live_options import LIVE_OPTIONS
from stanpkg.pipeline.options import OptionError, _positive, _seconds
from stanpkg.plan.subjects import channel_name_problem

__all__ = ["FAIL_FIRST_ATTEMPT", "SINK_OPTIONS", "SinkOptions", "channel_problem"]

# For tests only (not documented): a task's first attempt fails once it has published
# this many rows and their PubAcks came back, so that Spark retries it.
FAIL_FIRST_ATTEMPT = "testonlyfailfirstattemptafter"

DEFAULT_MAX_INFLIGHT = 16384  # the Go client's MaxPubAcksInflight
DEFAULT_ACK_TIMEOUT = 30.0  # the Go client's AckWait

# Lower-cased, as Spark hands options case-insensitively.
SINK_OPTIONS = CONNECTION_OPTIONS | {"channel", "maxinflight", "acktimeout", FAIL_FIRST_ATTEMPT}
# Spark's own options, passed to the sink with the user's.
_SPARK_OPTIONS = frozenset({"checkpointlocation"})


@dataclass(frozen=True)
class SinkOptions:
    """What publishing a DataFrame's rows needs."""

    connection: ConnectionOptions
    channel: str = ""  # rows without a channel column (or with a null one) go here
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    ack_timeout: float = DEFAULT_ACK_TIMEOUT
    fail_first_attempt_after: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = {k.lower(): v for k, v in options.items() if k.lower() not in _SPARK_OPTIONS}
        unknown = sorted(set(opts) - SINK_OPTIONS)
        if unknown:
            hint = ""
            if "channels" in unknown:
                hint = " (the sink writes to option channel, or to each row's channel column)"
            elif set(unknown) & LIVE_OPTIONS:
                hint = " (options of the live source, not of the sink)"
            elif "path" in unknown:
                hint = " (the sink publishes to a live server: give servers and cluster_id)"
            raise OptionError(
                f"unknown option(s) for the stan sink: {', '.join(unknown)}{hint}; "
                f"accepted: {', '.join(sorted(SINK_OPTIONS - {FAIL_FIRST_ATTEMPT}))}"
            )
        channel = opts.get("channel", "").strip()
        if channel:
            problem = channel_problem(channel)
            if problem:
                raise OptionError(f"channel: {problem}")
        fail_after = opts.get(FAIL_FIRST_ATTEMPT, "").strip()
        max_inflight = _positive(opts, "maxinflight", DEFAULT_MAX_INFLIGHT)
        ack_timeout = _seconds(opts, "acktimeout", DEFAULT_ACK_TIMEOUT)
        fail_first = _positive(opts, FAIL_FIRST_ATTEMPT, 1) if fail_after else None
        return cls(
            # Checked last: with both wrong, the sink's own option is the one named.
            connection=ConnectionOptions.parse(opts),
            channel=channel,
            max_inflight=max_inflight,
            ack_timeout=ack_timeout,
            fail_first_attempt_after=fail_first,
        )


def channel_problem(name: str) -> str | None:
    """Why ``name`` cannot be published to (None if it can): STAN channel names."""
    problem = channel_name_problem(name, allow_wildcards=False)
    return None if problem is None else f"invalid channel name {name!r}: {problem.message}"
