"""setuptools' build backend, deciding whether a wheel carries the compiled hot path
(stanpkg/hot_path.py's modules through mypyc, see setup.py) and adding the compiler to the
build requirements only when it does.

``STANPKG_COMPILE`` chooses: ``1`` compiles (a build that cannot fails), ``0`` builds pure
Python, unset (or ``auto``) compiles a wheel where CPython can build C extensions here (a C
compiler that finds ``Python.h``) and otherwise builds pure Python, saying so in one line.
Editable installs stay pure unless ``1`` asks: a compiled module would shadow the source a
developer edits. The decision is taken afresh by each hook (pip runs them in separate
processes), from the same environment, so the hooks agree.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every hook not changed below

# The compiler's version decides the C it writes: an upper bound keeps a new mypy release
# from changing (or breaking) the build; packaging/constraints-build.txt pins it exactly.
MYPYC = "mypy>=2.4.1,<2.5"
ENV = "STANPKG_COMPILE"

Settings = dict[str, Any] | None


def _say(line: str) -> None:
    print(f"stanpkg build: {line}", file=sys.stderr, flush=True)


def why_not_compiled() -> str | None:
    """Why this interpreter cannot build the compiled modules, or None when it can."""
    if sys.implementation.name != "cpython":
        return f"{sys.implementation.name} runs no mypyc extensions"
    include = Path(sysconfig.get_path("include"))
    if not (include / "Python.h").exists():
        return f"no Python headers ({include}/Python.h: install python3-dev)"
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC")  # setuptools takes CC too
    if not cc:  # Windows: no compiler is assumed there (docs/install.md)
        return "no C compiler is configured for this Python"
    # The compiler must take Python.h for real: present but broken (no libc headers) counts
    # as absent, so a machine without build tools still installs.
    check = [*shlex.split(cc), "-fsyntax-only", f"-I{include}", "-x", "c", "-"]
    try:
        subprocess.run(
            check, input=b"#include <Python.h>\n", capture_output=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the C compiler ({cc}) cannot build against Python.h ({exc.__class__.__name__})"
    return None


def compiling(editable: bool) -> bool:
    """Whether this build compiles, from ``STANPKG_COMPILE`` and this machine."""
    asked = os.environ.get(ENV, "auto").strip().lower()
    if asked == "1":
        return True
    if asked == "0" or editable:
        return False
    reason = why_not_compiled()
    if reason is not None:
        _say(f"pure Python build: {reason} (the compiled hot path is about twice as fast)")
        return False
    return True


def _requires(
    hook: Callable[[Settings], list[str]], settings: Settings, editable: bool
) -> list[str]:
    wanted = compiling(editable)
    # setuptools runs setup.py to answer, before mypy is installed: not compiling then.
    os.environ[ENV] = "0"
    try:
        requires = hook(settings)
    finally:
        os.environ[ENV] = "1" if wanted else "0"
    return [*requires, MYPYC] if wanted else requires


def _build(hook: Callable[..., str], editable: bool, *args: Any, **kwargs: Any) -> str:
    # setup.py reads the decision from ENV: "1" compiles, anything else is pure.
    os.environ[ENV] = "1" if compiling(editable) else "0"
    return hook(*args, **kwargs)


def get_requires_for_build_wheel(config_settings: Settings = None) -> list[str]:
    return _requires(_setuptools.get_requires_for_build_wheel, config_settings, editable=False)


def get_requires_for_build_editable(config_settings: Settings = None) -> list[str]:
    return _requires(_setuptools.get_requires_for_build_editable, config_settings, editable=True)


def build_wheel(*args: Any, **kwargs: Any) -> str:
    return _build(_setuptools.build_wheel, False, *args, **kwargs)


def build_editable(*args: Any, **kwargs: Any) -> str:
    return _build(_setuptools.build_editable, True, *args, **kwargs)
