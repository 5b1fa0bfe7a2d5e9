"""Suite-wide: when tests/packaging/test_compiled.py runs tests against the compiled build,
make sure that build is what they import (not the checkout's sources)."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("STANPKG_EXPECT_COMPILED") == "1":
        from stanpkg.hot_path import MODULES, compiled_modules

        if compiled_modules() != list(MODULES):
            raise pytest.UsageError(f"expected the compiled build, got {compiled_modules()}")
