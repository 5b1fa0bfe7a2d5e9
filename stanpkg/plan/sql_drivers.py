"""Which SQL drivers are optional dependencies, and what to install when one is missing.

Here rather than in the SQL store so that `stanpkg validate` can say it without loading
the store: the plan's rules sit below the stores.
"""

from __future__ import annotations

import importlib.util

__all__ = ["OPTIONAL_DRIVERS", "install_hint", "missing_driver"]

# The drivers that are optional dependencies: the module each imports, and the extra of
# the stanpkg distribution that installs it (pyproject.toml; the deb and rpm bundle both).
OPTIONAL_DRIVERS = {"postgres": ("psycopg", "postgres"), "mysql": ("pymysql", "mysql")}


def install_hint(name: str, reason: str) -> str:
    module, extra = OPTIONAL_DRIVERS[name]
    return (
        f"sql: the {name} driver needs the Python module {module}, which is not installed "
        f"({reason}): pip install 'stanpkg[{extra}]' into stanpkg's environment"
    )


def missing_driver(name: str) -> str | None:
    """Why ``name`` cannot be used on this installation (with what to install), or None.
    Looks for the module without importing it (``stanpkg validate`` stays quick)."""
    if name not in OPTIONAL_DRIVERS:
        return None
    module = OPTIONAL_DRIVERS[name][0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError) as exc:
        return install_hint(name, str(exc))
    return None if found else install_hint(name, f"no module named {module!r}")
