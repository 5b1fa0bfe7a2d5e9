"""setuptools' build backend, plus mypy (mypyc) as a build requirement when the build is
asked to compile (``STANPKG_COMPILE=1``, see setup.py): pure builds do not download it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every hook not changed below

MYPYC = "mypy>=1.10"

Settings = dict[str, Any] | None


def _plus_mypyc(hook: Callable[[Settings], list[str]], settings: Settings) -> list[str]:
    compiling = os.environ.get("STANPKG_COMPILE") == "1"
    # setuptools runs setup.py to answer, before mypy is installed: not compiling then.
    os.environ["STANPKG_COMPILE"] = "0"
    try:
        requires = hook(settings)
    finally:
        os.environ["STANPKG_COMPILE"] = "1" if compiling else "0"
    return [*requires, MYPYC] if compiling else requires


def get_requires_for_build_wheel(config_settings: Settings = None) -> list[str]:
    return _plus_mypyc(_setuptools.get_requires_for_build_wheel, config_settings)


def get_requires_for_build_editable(config_settings: Settings = None) -> list[str]:
    return _plus_mypyc(_setuptools.get_requires_for_build_editable, config_settings)
