"""docs/grafana-dashboard.json only queries metrics that /metrics exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from stanpkg.monitor import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
METRIC_NAME = re.compile(r"\b((?:nss|process)_[a-z_]+)\b")


def _exprs(panels: list[dict[str, Any]]) -> list[str]:
    found = []
    for panel in panels:
        found.extend(target["expr"] for target in panel.get("targets", []))
        found.extend(_exprs(panel.get("panels", [])))
    return found


def test_dashboard_queries_exposed_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exposed = {family.name for family, _ in metrics.SERVER_FAMILIES}
    exposed |= {family.name for family, _ in metrics.CHANNEL_FAMILIES}
    exposed |= {family.name for family, _ in metrics.SUBSCRIPTION_FAMILIES}
    exposed |= {metrics.SERVER_ACTIVE.name, metrics.SERVER_INFO.name}
    exposed |= {"process_resident_memory_bytes", "process_open_fds", "process_max_fds"}
    exprs = _exprs(dashboard["panels"])
    assert len(exprs) > 20
    used = {name for expr in exprs for name in METRIC_NAME.findall(expr)}
    assert used <= exposed, used - exposed
    for variable in dashboard["templating"]["list"]:
        for name in METRIC_NAME.findall(variable.get("definition", "")):
            assert name in exposed
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
