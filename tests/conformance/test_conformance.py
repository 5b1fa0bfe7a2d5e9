"""Every shared conformance case: same accept/reject as the reference, identical limits block.

The cases run in an empty temporary working directory with only the case's environment,
as they were recorded. Where stanpkg deliberately does better (conformance README) the
case is listed in ``cases.py`` with the reason.
"""

from __future__ import annotations

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.diagnostics import Severity
from stanpkg.plan.limits import render_store_limits
from tests.conformance.cases import CONFORMANCE, USAGE_ERRORS, Case, load_cases

CASES = load_cases()
pytestmark = pytest.mark.skipif(not CASES, reason=f"no conformance cases in {CONFORMANCE}")


def _compile(
    case: Case, tmp_path: pytest.TempPathFactory | object, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    return compile_args(case.argv(), env={"PATH": "/usr/bin:/bin", **case.env})


def test_cases_are_present() -> None:
    assert len(CASES) >= 90


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_accept_or_reject(case: Case, tmp_path, monkeypatch) -> None:
    result = _compile(case, tmp_path, monkeypatch)
    if case.name in USAGE_ERRORS:
        assert result.usage_error, "expected a command-line usage error"
        assert "\n" not in result.usage_error
        return
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    if case.stanpkg_accepts:
        assert not result.usage_error
        assert result.plan is not None, "\n".join(map(str, result.diagnostics))
        assert not errors
    else:
        assert result.plan is None and errors, "stanpkg must reject this configuration"
        for diag in errors:
            text = str(diag)
            assert "Traceback" not in text
            if diag.pos is not None:
                assert diag.pos.line >= 1 and diag.pos.col >= 1
                assert text.startswith(f"{diag.pos.file}:{diag.pos.line}:{diag.pos.col}: error: ")


ACCEPTED_WITH_LIMITS = [c for c in CASES if c.reference_runs and c.stanpkg_accepts]


@pytest.mark.parametrize("case", ACCEPTED_WITH_LIMITS, ids=[c.name for c in ACCEPTED_WITH_LIMITS])
def test_limits_block_identical(case: Case, tmp_path, monkeypatch) -> None:
    result = _compile(case, tmp_path, monkeypatch)
    assert result.plan is not None
    expected = case.limits_block()
    assert expected, "case has no recorded limits block"
    assert render_store_limits(result.plan.store_limits) == expected


@pytest.mark.parametrize("case", ACCEPTED_WITH_LIMITS, ids=[c.name for c in ACCEPTED_WITH_LIMITS])
def test_startup_facts(case: Case, tmp_path, monkeypatch) -> None:
    """Cluster ID, store label and location, cluster node and peers as the reference logs."""
    plan = _compile(case, tmp_path, monkeypatch).plan
    assert plan is not None
    assert case.log_text("Starting nats-streaming-server[") == [f"{plan.cluster_id}]"]
    assert case.log_text("Message store is ") == [plan.store_label]
    assert case.log_text("Store location: ") == ([plan.dir] if plan.dir else [])
    node = case.log_text("Cluster Node ID : ")
    if node and node != ["<nuid>"]:
        assert node == [plan.cluster.node_id]
    peers = [p.split(": ", 1)[1].strip('"') for p in case.log_text("peer ")]
    assert peers == list(plan.cluster.peers)
    discover = case.log_text("[DBG] STREAM: Discover subject:")
    if discover:
        assert discover[0].strip() == plan.discover_subject
