"""The compiled build: the manylinux wheel that `make dist` built for this machine's
CPython carries the per-message modules of stanpkg/hot_path.py compiled with mypyc, says
so in ``--version``, and passes the transport and server tests that exercise those
modules, run against it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stanpkg.hot_path import MODULES
from tests.packaging.fixtures import VERSION, dist_dir

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# The tests that go through the compiled modules: the NATS parser, publishing, delivery
# and acks, the hand-built protocol bytes, bad input, the memory and FILE stores' logs.
SUITE = [
    "tests/transport/test_parser.py",
    "tests/transport/test_connection.py",
    "tests/server/test_wire.py",
    "tests/server/test_publish.py",
    "tests/server/test_delivery.py",
    "tests/server/test_subscribe.py",
    "tests/server/test_heartbeats.py",
    "tests/server/test_bad_input.py",
    "tests/server/test_limits.py",
    "tests/server/test_memory_store.py",
    "tests/server/test_recovery.py",
    "tests/stores/file/test_messages.py",
    "tests/stores/file/test_subs_clients.py",
    "tests/stores/test_file_modes.py",
    "tests/stores/jetstream/test_recent_guids.py",
    "tests/stores/jetstream/test_packs.py",
    "tests/stores/jetstream/test_joined_batches.py",
    "tests/stores/jetstream/test_fencing.py",
    "tests/stores/jetstream/test_on_demand.py",
]


@pytest.fixture(scope="module")
def compiled_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled wheel of the clean build for this CPython (3.11), unpacked."""
    tag = "cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64"
    wheels = list(dist_dir().glob(f"stanpkg-{VERSION}-{tag}.whl"))
    assert len(wheels) == 1, sorted(p.name for p in dist_dir().iterdir())
    site = tmp_path_factory.mktemp("compiled") / "site"
    with zipfile.ZipFile(wheels[0]) as whl:
        whl.extractall(site)
    return site


def _env(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(site)}


def test_the_wheel_has_every_hot_path_module_compiled(compiled_site: Path) -> None:
    suffix = ".cpython-311-x86_64-linux-gnu.so"
    expected = [f"{name.replace('.', '/')}{suffix}" for name in MODULES]
    expected.append(f"stanpkg_hot_path__mypyc{suffix}")  # mypyc's shared runtime part
    found = [path.relative_to(compiled_site).as_posix() for path in compiled_site.rglob("*.so")]
    assert sorted(found) == sorted(expected)
    for name in MODULES:  # the source stays beside each
        assert (compiled_site / f"{name.replace('.', '/')}.py").exists(), name
    out = subprocess.run(
        [sys.executable, "-P", "-c", "from stanpkg.cli import main; main()", "--version"],
        env=_env(compiled_site),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines()[-1] == "hot path: compiled (mypyc)"


def test_the_compiled_modules_pass_their_tests(compiled_site: Path) -> None:
    env = {**_env(compiled_site), "STANPKG_EXPECT_COMPILED": "1"}
    check = (
        "from stanpkg.hot_path import MODULES, compiled_modules; "
        "assert compiled_modules() == list(MODULES), compiled_modules()"
    )
    subprocess.run([sys.executable, "-P", "-c", check], env=env, check=True, cwd=ROOT)
    # The build before the checkout (whose tests/ still come from the checkout): pytest
    # puts its pythonpath setting first, so the build goes first in it.
    pytest_argv = [
        "-P",
        "-m",
        "pytest",
        "-o",
        f"pythonpath={compiled_site} .",
        "-p",
        "no:cacheprovider",
    ]
    result = subprocess.run(
        [sys.executable, *pytest_argv, "-q", "-x", *SUITE],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
