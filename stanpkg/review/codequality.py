"""``--format gitlab``: a GitLab Code Quality report (``artifacts:reports:codequality``),
which GitLab shows in the merge request. GitLab reads SARIF only as a security report,
so configuration problems go this way.

The report is a JSON array of issues, each with the fields GitLab requires:
``description``, ``check_name``, ``fingerprint`` (unique per issue, stable between runs),
``severity`` (``info``, ``minor``, ``major``, ``critical`` or ``blocker``) and
``location.path`` with ``location.lines.begin``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from stanpkg.review.findings import Finding


def _fingerprint(finding: Finding, seen: dict[str, int]) -> str:
    key = "\0".join(
        (finding.code, finding.path, str(finding.line), str(finding.column), finding.message)
    )
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    seen[digest] = seen.get(digest, 0) + 1  # the same text twice still makes two issues
    if seen[digest] > 1:
        digest = hashlib.sha256(f"{digest}{seen[digest]}".encode()).hexdigest()
    return digest


def code_quality_report(found: Sequence[Finding]) -> list[dict[str, Any]]:
    seen: dict[str, int] = {}
    return [
        {
            "description": finding.message,
            "check_name": finding.code,
            "fingerprint": _fingerprint(finding, seen),
            "severity": "critical" if finding.is_error else "minor",
            "location": {"path": finding.path, "lines": {"begin": finding.line or 1}},
        }
        for finding in found
    ]
