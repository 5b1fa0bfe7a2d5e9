"""Fixtures of the packaging tests: the built artifacts (once per session) and booted
Debian containers (see containers.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging import containers, fixtures


@pytest.fixture(scope="session")
def deb_file() -> Path:
    fixtures.need_tools("dpkg-buildpackage", "dh")
    return fixtures.build_deb()


@pytest.fixture(scope="session")
def rpm_file() -> Path:
    fixtures.need_tools("rpmbuild")
    return fixtures.build_rpm()


@pytest.fixture(scope="session")
def python_dist() -> Path:
    return fixtures.build_python()


@pytest.fixture(scope="session")
def nupkg_file() -> Path:
    return fixtures.build_nupkg()


@pytest.fixture(scope="session")
def formula_file() -> Path:
    return fixtures.build_formula()


@pytest.fixture(scope="session")
def base_rootfs() -> Path:
    try:
        return containers.base_rootfs()
    except containers.Unavailable as exc:
        pytest.skip(f"no Debian container on this machine: {exc}")


@pytest.fixture
def machine(base_rootfs: Path, tmp_path: Path) -> Iterator[containers.Machine]:
    try:
        name = "stanpkg-" + re.sub(r"[^a-z0-9]+", "-", tmp_path.name.lower())[-30:]
        with containers.booted(tmp_path, name) as m:
            yield m
    except containers.Unavailable as exc:
        pytest.skip(f"cannot boot a systemd container here: {exc}")
