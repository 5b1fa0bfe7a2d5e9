"""Building from a fresh clone, as a new user does: `make dist` in a copy of the checkout,
with a venv of its own and an environment that shares nothing with the test venv (no
site-packages, no pip or mypy cache: fixtures.clean_build), gives every artifact, the
compiled wheels among them, and gives them again byte for byte. A source install compiles
where it can and says so where it cannot."""

from __future__ import annotations

import hashlib
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from stanpkg.hot_path import MODULES
from tests.packaging.fixtures import (
    VERSION,
    build_dir,
    clean_build,
    clean_env,
    dist_dir,
    need_tools,
    pip_install_in_a_new_venv,
)

pytestmark = pytest.mark.slow
MANYLINUX = "manylinux2014_x86_64.manylinux_2_17_x86_64"


def _compiled_wheels() -> dict[str, Path]:
    """The manylinux wheels of the clean build, by CPython tag (cp311, ...)."""
    return {
        p.name.split("-")[2]: p for p in dist_dir().glob(f"stanpkg-{VERSION}-cp3*-{MANYLINUX}.whl")
    }


def test_make_dist_in_a_fresh_clone_builds_every_artifact() -> None:
    names = {p.name for p in dist_dir().iterdir()}
    expected = {
        f"stanpkg-{VERSION}.tar.gz",
        f"stanpkg-{VERSION}-py3-none-any.whl",
        f"stanpkg_{VERSION}-1_amd64.deb",
        f"stanpkg-{VERSION}-1.x86_64.rpm",
        f"stanpkg.{VERSION}.nupkg",
        "stanpkg.rb",
    }
    if os.geteuid() == 0:
        expected.add(f"stanpkg-{VERSION}-oci.tar")
    assert expected <= names, sorted(names)
    # This machine's CPython 3.11 at least; 3.12 and 3.13 where the machine has them.
    assert "cp311" in _compiled_wheels(), sorted(names)


@pytest.mark.parametrize("tag", ["cp311", "cp312", "cp313"])
def test_each_compiled_wheel_has_every_hot_path_module(tag: str) -> None:
    wheel = _compiled_wheels().get(tag)
    if wheel is None:
        pytest.skip(f"no CPython {tag} on this machine: the packages install the pure wheel")
    version = f"{tag[2]}{tag[3:]}"
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    for module in MODULES:
        assert f"{module.replace('.', '/')}.cpython-{version}-x86_64-linux-gnu.so" in names
    # The deb and rpm ship it beside the pure wheel, for pip on the target to prefer.
    assert (build_dir() / "wheelhouse-linux" / wheel.name).exists()


def test_pip_install_of_the_source_compiles_by_default(tmp_path: Path) -> None:
    """What the quickstart does (`pip install .`): no STANPKG_COMPILE, a C compiler and
    the Python headers present, so the wheel pip builds is the compiled one."""
    env = clean_env(tmp_path / "home")
    venv = pip_install_in_a_new_venv(clean_build(), tmp_path, env)
    version = subprocess.run(
        [str(venv / "bin" / "stanpkg"), "--version"], capture_output=True, text=True, env=env
    )
    assert version.stdout.splitlines()[-1] == "hot path: compiled (mypyc)", version.stdout


def test_without_a_local_cpython_313_its_wheel_is_built_in_a_debian_13_chroot(
    tmp_path: Path,
) -> None:
    """What build-python.sh does on a build machine with no CPython 3.13 (a bare Debian 12):
    the compiled cp313 wheel comes from a trixie chroot's python3 instead."""
    if os.geteuid() != 0:
        pytest.skip("the chroot needs root")
    need_tools("debootstrap", "chroot")
    sdist = dist_dir() / f"stanpkg-{VERSION}.tar.gz"
    out = tmp_path / "out"
    proc = subprocess.run(
        ["bash", "packaging/build-in-debian.sh", "trixie", str(sdist), str(out)],
        cwd=clean_build(),
        env=clean_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    assert wheel.name == f"stanpkg-{VERSION}-cp313-cp313-linux_x86_64.whl"
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    for module in MODULES:
        assert f"{module.replace('.', '/')}.cpython-313-x86_64-linux-gnu.so" in names


def _build_wheel(tmp_path: Path, **env: str) -> tuple[list[str], str]:
    out = tmp_path / "out"
    sdist = dist_dir() / f"stanpkg-{VERSION}.tar.gz"
    python = clean_build() / ".venv" / "bin" / "python"  # the clean build's, with `build`
    proc = subprocess.run(
        [str(python), "-m", "build", "--wheel", "--outdir", str(out), str(sdist)],
        env={**clean_env(tmp_path / "home"), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return sorted(p.name for p in out.glob("*.whl")), proc.stdout + proc.stderr


def test_python_m_build_compiles_by_default(tmp_path: Path) -> None:
    wheels, output = _build_wheel(tmp_path)
    assert wheels == [f"stanpkg-{VERSION}-cp311-cp311-linux_x86_64.whl"], output[-3000:]


def test_without_a_c_compiler_the_build_is_pure_and_says_why(tmp_path: Path) -> None:
    wheels, output = _build_wheel(tmp_path, CC="/nonexistent/cc")
    assert wheels == [f"stanpkg-{VERSION}-py3-none-any.whl"]
    lines = [line for line in output.splitlines() if line.startswith("stanpkg build:")]
    assert lines and all("pure Python build: the C compiler" in line for line in lines), output


def test_stanpkg_compile_0_builds_pure_python_without_the_compiler(tmp_path: Path) -> None:
    wheels, output = _build_wheel(tmp_path, STANPKG_COMPILE="0")
    assert wheels == [f"stanpkg-{VERSION}-py3-none-any.whl"]
    assert "mypy" not in output  # not even installed into the build environment


def _digests(paths: list[Path]) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_the_python_artifacts_and_the_deb_build_the_same_bytes_again() -> None:
    """SOURCE_DATE_EPOCH (the commit's time) for every archive, and compiled objects that
    name no build directory (setup.py): a second build of the same commit is identical."""
    tree = clean_build()
    outputs = [
        *dist_dir().glob("stanpkg-*.whl"),
        dist_dir() / f"stanpkg-{VERSION}.tar.gz",
        dist_dir() / f"stanpkg_{VERSION}-1_amd64.deb",
    ]
    first = _digests(outputs)
    env = clean_env(tree.parent / "home")
    proc = subprocess.run(
        ["make", "python", "deb"], cwd=tree, env=env, capture_output=True, text=True, timeout=2400
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _digests(outputs) == first
