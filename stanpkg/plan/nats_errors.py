"""nats-server's complaints about the generated configuration, shown where the operator
wrote the option.

The embedded nats-server reads a file stanpkg generates: our own settings first, then the
operator's NATS-only entries rendered back to text (``NatsServerOptions.passthrough``).
nats-server names lines of that generated file; the plan knows which line of the
operator's file each passed-through line came from.
"""

from __future__ import annotations

import re

from stanpkg.conf import Position
from stanpkg.plan.diagnostics import Diagnostic, error
from stanpkg.plan.model import NatsServerOptions
from stanpkg.plan.redact import redact_urls

# "nats.conf:12:3: unknown field "bogus"" (the file name as the checker shows it).
_POSITIONED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+):\s*(?P<message>.*)$")
# Its lexer's complaints name a line only: "Parse error on line 9: '...'".
_PARSE_ERROR = re.compile(r"^Parse error on line (?P<line>\d+): (?P<message>.*)$")


def user_position(generated: str, generated_line: int, nats: NatsServerOptions) -> Position | None:
    """The operator's position behind ``generated_line`` (1-based) of the generated
    configuration text, or None when that line is one of stanpkg's own."""
    if not nats.passthrough or not nats.passthrough_positions:
        return None
    start = generated.find(nats.passthrough)
    if start < 0:
        return None
    index = generated_line - (generated.count("\n", 0, start) + 1)
    if 0 <= index < len(nats.passthrough_positions):
        return nats.passthrough_positions[index]
    return None


def nats_problem(
    problem: str, generated: str, generated_name: str, nats: NatsServerOptions
) -> Diagnostic:
    """One line of ``nats-server -t`` output about ``generated`` (shown as
    ``generated_name``) as a diagnostic at the operator's file and line. The URLs it
    quotes (a route's, a leafnode remote's) lose their passwords."""
    problem = redact_urls(problem)
    match = _POSITIONED.match(problem)
    if match is None or match["file"] != generated_name:
        match = _PARSE_ERROR.match(problem)
    if match is not None:
        pos = user_position(generated, int(match["line"]), nats)
        if pos is not None:
            return error(
                f"the NATS server rejects this option: {match['message']}", pos, code="nats"
            )
    return error(
        f"the NATS server rejects the NATS options of this file: {problem}",
        where=nats.config_file,
        code="nats",
    )
