"""No module of stanpkg imports itself through others (type-only and function-level imports
count: a cycle is a cycle in the design, whenever Python resolves it), and no module grows
past MAX_LINES. The known exceptions are listed and may only shrink: a new cycle or a new
oversized module fails, and so does one that is gone but still listed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "stanpkg"
MAX_LINES = 700
KNOWN_CYCLES: set[frozenset[str]] = set()
KNOWN_LARGE: set[str] = set()
GENERATED = ("_pb2.py", "_pb2.pyi")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The stanpkg module ``name`` resolves to (a module, or the package of a name)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".")
        if MODULES[module].name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    # ``from package import name``: the module ``package.name`` if there is one, else the
    # package itself (importing a submodule runs its package first, but that is Python's
    # doing, not a dependency of the design).
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
        for alias in node.names
    ]


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(module, node):
                    owner = _owner(target) if target.startswith("stanpkg") else None
                    if owner and owner != module and owner != "stanpkg":
                        deps.add(owner)
        graph[module] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.add(frozenset(m.removeprefix("stanpkg.") for m in component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules() -> None:
    cycles = _cycles(_graph())
    new = [sorted(c) for c in cycles - KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES - cycles]
    assert not new, f"import cycles: {new}"
    assert not gone, f"no longer cycles, drop them from KNOWN_CYCLES: {gone}"


def test_a_cycle_is_found_through_type_only_and_late_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == {frozenset({"a", "b", "c"})}


def test_no_module_over_the_size_limit() -> None:
    large = {
        path.relative_to(PACKAGE).as_posix()
        for path in MODULES.values()
        if not path.name.endswith(GENERATED)
        and len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    }
    assert not large - KNOWN_LARGE, f"modules over {MAX_LINES} lines: {sorted(large - KNOWN_LARGE)}"
    assert not KNOWN_LARGE - large, f"drop from KNOWN_LARGE: {sorted(KNOWN_LARGE - large)}"
