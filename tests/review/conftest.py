"""Fixtures for the review tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.review.configs import write_problems


@pytest.fixture
def problems_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The configuration with problems (configs.write_problems) in ``tmp_path``, made the
    working directory so that diagnostics name ``stan.conf`` and ``limits.conf``."""
    main = write_problems(tmp_path)
    monkeypatch.chdir(tmp_path)
    return main
