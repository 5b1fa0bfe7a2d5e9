"""``--format sarif``: SARIF 2.1.0 (OASIS), the static-analysis format GitHub code scanning,
GitLab and SARIF viewers read.

One run of the ``stanpkg`` tool; one result per diagnostic, with the rule (the
diagnostic's code), the level, the message and the physical location (file, line,
column); the rules the results use are described once, in the driver. Relative paths
are relative to ``%SRCROOT%``, the directory the check ran in (given in
``originalUriBaseIds``), so code scanning places them in the repository.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from stanpkg import __version__
from stanpkg.review.findings import Finding

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"
INFORMATION_URI = "https://github.com/stanpkg/stanpkg"
HELP_URI = "https://github.com/stanpkg/stanpkg/blob/main/docs/validate.md"

Document = dict[str, Any]


def artifact_location(path: str) -> Document:
    """A file as a SARIF artifact location: an absolute path as a ``file:`` URI, a
    relative one as a relative URI reference against ``%SRCROOT%``."""
    pure = PurePath(path)
    if pure.is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(pure.as_posix()), "uriBaseId": SRCROOT}


def _rule(code: str, title: str) -> Document:
    return {
        "id": code,
        "shortDescription": {"text": title},
        "helpUri": HELP_URI,
    }


def _location(finding: Finding) -> Document:
    physical: Document = {"artifactLocation": artifact_location(finding.path)}
    if finding.line:
        region: Document = {"startLine": finding.line}
        if finding.column:
            region["startColumn"] = finding.column
        physical["region"] = region
    return {"physicalLocation": physical}


def _result(finding: Finding, rule_index: int) -> Document:
    result: Document = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": "error" if finding.is_error else "warning",
        "message": {"text": finding.message},
    }
    if finding.path:
        result["locations"] = [_location(finding)]
    return result


def sarif_log(found: Sequence[Finding], *, cwd: str | None = None) -> Document:
    """The SARIF log of ``found``; ``cwd`` (default: the current directory) is the root
    relative paths are given against."""
    rules: list[Document] = []
    index: dict[str, int] = {}
    results = []
    for finding in found:
        if finding.code not in index:
            index[finding.code] = len(rules)
            rules.append(_rule(finding.code, finding.title))
        results.append(_result(finding, index[finding.code]))
    root = Path(cwd) if cwd is not None else Path.cwd()
    run: Document = {
        "tool": {
            "driver": {
                "name": "stanpkg",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        # Our columns count characters (code points), not UTF-16 units.
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": {SRCROOT: {"uri": root.resolve().as_uri() + "/"}},
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": VERSION, "runs": [run]}
