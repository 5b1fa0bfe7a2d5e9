"""``--format github``: GitHub Actions workflow commands, which the runner turns into
annotations on the pull request's changed lines, with no extra tool.

``::error file=stan.conf,line=3,col=5,title=...::message`` (or ``::warning``). Escaping
is the runner's (actions/toolkit ``command.ts``, actions/runner ``ActionCommand.cs``):
in the message ``%``, CR and LF become ``%25``, ``%0D``, ``%0A``; in a property value
``:`` and ``,`` also become ``%3A`` and ``%2C`` (they separate the properties).
"""

from __future__ import annotations

from collections.abc import Sequence

from stanpkg.review.findings import Finding


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(finding: Finding) -> str:
    properties: list[tuple[str, str]] = []
    if finding.path:
        properties.append(("file", finding.path))
        if finding.line:
            properties.append(("line", str(finding.line)))
            if finding.column:
                properties.append(("col", str(finding.column)))
    properties.append(("title", f"stanpkg {finding.code}: {finding.title}"))
    command = "error" if finding.is_error else "warning"
    props = ",".join(f"{name}={escape_property(value)}" for name, value in properties)
    return f"::{command} {props}::{escape_data(finding.message)}"


def workflow_commands(found: Sequence[Finding]) -> list[str]:
    return [workflow_command(finding) for finding in found]
