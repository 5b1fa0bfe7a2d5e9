"""docs/pipeline.md stays true: its server configuration validates, its units exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

from stanpkg.plan.compile import compile_args

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "pipeline.md"


def test_documented_config_wires_the_archive_script(tmp_path: Path) -> None:
    blocks = re.findall(r"```\n(streaming \{.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1
    # The documented wrapper, installed where the validator can see it.
    wrapper = tmp_path / "archive-slice"
    wrapper.write_text('#!/bin/sh\nexec stanpkg archive-slice "$@"\n')
    wrapper.chmod(0o755)
    text = blocks[0].replace("/usr/lib/stanpkg/archive-slice", str(wrapper))
    conf = tmp_path / "stan.conf"
    conf.write_text(text)
    result = compile_args(["-sc", os.fspath(conf)], env={})
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    assert result.plan.file_options.slice_archive_script == str(wrapper)


def test_systemd_units_reference_each_other() -> None:
    unit_dir = ROOT / "packaging" / "systemd"
    service = (unit_dir / "stanpkg-export.service").read_text()
    timer = (unit_dir / "stanpkg-export.timer").read_text()
    assert "Type=oneshot" in service and "stanpkg export --config" in service
    # An archiving job: messages removed between two runs are exported too.
    assert "--include-removed --include-archived" in service
    assert "OnCalendar=" in timer and "Persistent=true" in timer
    assert "stanpkg-export.timer" in DOC.read_text()


def test_sink_options_are_documented() -> None:
    from stanpkg.pipeline.sink_options import FAIL_FIRST_ATTEMPT, SINK_OPTIONS

    section = DOC.read_text().split("### Options of the sink")[1].split("\n### ")[0]
    documented = {name.lower() for name in re.findall(r"`(\w+)`", section)}
    # clusterId is cluster_id's other spelling; the failure injection is for tests only.
    assert SINK_OPTIONS - {FAIL_FIRST_ATTEMPT, "clusterid"} <= documented
