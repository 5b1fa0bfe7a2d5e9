"""The formats review tools read, chosen by ``--format``: SARIF, GitHub workflow commands,
GitLab Code Quality. (``text`` and ``json`` are ``stanpkg validate``'s own.)"""

from __future__ import annotations

import json
from collections.abc import Sequence

from stanpkg.review.codequality import code_quality_report
from stanpkg.review.findings import Finding
from stanpkg.review.github import workflow_commands
from stanpkg.review.sarif import sarif_log

REVIEW_FORMATS = ("sarif", "github", "gitlab")


def render(fmt: str, found: Sequence[Finding]) -> str:
    """What ``--format fmt`` prints on standard output."""
    match fmt:
        case "sarif":
            return json.dumps(sarif_log(found), indent=2, ensure_ascii=False) + "\n"
        case "github":
            return "".join(line + "\n" for line in workflow_commands(found))
        case "gitlab":
            return json.dumps(code_quality_report(found), indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"not a review format: {fmt}")
