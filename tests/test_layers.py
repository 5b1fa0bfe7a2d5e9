"""The architecture holds: each package imports only the layers below it, no two packages
import each other, and only the configuration layer and the command-line entry points read
the environment (docs/architecture.md)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "stanpkg"

# docs/architecture.md's table: a unit (top-level package or module of stanpkg) may import
# units of its own layer's packages only if listed in SAME_LAYER, and any lower layer.
LAYERS: dict[str, int] = {
    "hot_path": 0,  # which modules are compiled: imports nothing of stanpkg
    "conf": 1,
    "plan": 2,
    "proto": 3,
    "transport": 3,
    "stores": 4,
    "client": 4,
    "server": 5,
    "monitor": 6,
    "node": 7,
    "send_signal": 7,
    "cli": 7,
    "review": 7,
    "pipeline": 7,
    "migrate": 7,
    "loadgen": 7,
    "__init__": 7,
    "__main__": 7,
}
SAME_LAYER: set[tuple[str, str]] = {
    ("cli", "node"),
    ("cli", "send_signal"),
    ("cli", "pipeline"),
    ("cli", "loadgen"),
    ("cli", "migrate"),
    ("cli", "review"),
    ("review", "node"),  # --against's STAN client connects as the node would (nats_endpoint)
    ("migrate", "pipeline"),  # the channel selector of export
}
# The monitor reads the server only through its read-only view (plus the shared log and
# startup error types), never the server's internals.
MONITOR_MAY_IMPORT = {
    "stanpkg.server.monitoring_views",
    "stanpkg.server.errors",
    "stanpkg.server.log",
}
# Modules allowed to read os.environ: the configuration compiler and the entry points, plus
# the two fixed process conventions (systemd's NOTIFY_SOCKET, the nats-server binary path).
ENVIRONMENT_READERS = {
    "stanpkg.conf.parser",
    "stanpkg.plan.compile",
    "stanpkg.cli",
    "stanpkg.pipeline.cli",
    "stanpkg.pipeline.options",
    "stanpkg.pipeline.archive_layout",
    "stanpkg.pipeline.session",
    "stanpkg.migrate.cli",
    "stanpkg.server.sd_notify",
    "stanpkg.transport.embedded",
}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 2:
            parts = parts[:-1]
        found[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return found


MODULES = _modules()


def _unit(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def _imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("stanpkg.") and _known(name)}


def _known(name: str) -> bool:
    return name in MODULES


def test_every_unit_has_a_layer() -> None:
    assert {_unit(m) for m in MODULES} <= set(LAYERS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module: str) -> None:
    unit = _unit(module)
    wrong = []
    for target in sorted(_imports(MODULES[module])):
        other = _unit(target)
        if other == unit:
            continue
        if LAYERS[other] > LAYERS[unit]:
            wrong.append(f"{target} (layer {LAYERS[other]} above {LAYERS[unit]})")
        elif LAYERS[other] == LAYERS[unit] and (unit, other) not in SAME_LAYER:
            wrong.append(f"{target} (same layer {LAYERS[unit]})")
        elif unit == "monitor" and other == "server" and target not in MONITOR_MAY_IMPORT:
            wrong.append(f"{target} (the monitor reads the server through server.monitoring_views)")
    assert not wrong, f"{module} imports " + ", ".join(wrong)


def test_no_two_packages_import_each_other() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, tree in MODULES.items():
        for target in _imports(tree):
            if _unit(target) != _unit(module):
                edges[_unit(module)].add(_unit(target))

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        nexts = edges[start] - seen
        return any(nxt == goal or reaches(nxt, goal, seen | {nxt}) for nxt in nexts)

    cycles = sorted(unit for unit in list(edges) if reaches(unit, unit, set()))
    assert not cycles, f"import cycle through {cycles}"


def test_the_server_core_knows_no_mode() -> None:
    core = {m for m in MODULES if _unit(m) == "server" and ".modes" not in m}
    for module in core:
        for target in _imports(MODULES[module]):
            # The fault-tolerant mode's election (modes/ft_election.py) included.
            if target.startswith("stanpkg.server.modes"):
                assert target == "stanpkg.server.modes.base", f"{module} imports {target}"


def test_only_the_configuration_layer_reads_the_environment() -> None:
    readers = set()
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in {"environ", "getenv", "environb", "putenv"}
            ):
                readers.add(module)
    assert readers <= ENVIRONMENT_READERS, sorted(readers - ENVIRONMENT_READERS)
