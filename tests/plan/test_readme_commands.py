"""The README's everyday commands work as written from a checkout after the quickstart,
and the README names everything the test command installs before one runs it."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
VENV_BIN = Path(sys.executable).parent
# The scripts the test command runs that install Debian packages.
TEST_SCRIPTS = (
    "scripts/test.sh",
    "scripts/install-java.sh",
    "scripts/start-databases.sh",
    "packaging/install-tools.sh",
)


def _everyday_block() -> list[str]:
    section = README.split("## Everyday commands", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_stanpkg_is_put_on_the_path_before_it_is_used() -> None:
    lines = _everyday_block()
    assert lines[0] == 'export PATH="$PWD/.venv/bin:$PATH"'
    assert all(line.startswith("stanpkg ") for line in lines[1:]), lines
    assert "the `stanpkg` command into `.venv/bin/`" in README


def test_every_file_named_exists_in_the_checkout() -> None:
    for line in _everyday_block()[1:]:
        for word in shlex.split(line):
            if word.startswith("config_examples/"):
                assert (ROOT / word).is_file(), line


def test_the_offline_commands_succeed_as_written() -> None:
    """validate and plan (run, bench and export need a server or Spark)."""
    offline = [line for line in _everyday_block() if line.split()[1] in ("validate", "plan")]
    assert len(offline) >= 3
    for line in offline:
        argv = [str(VENV_BIN / "stanpkg"), *shlex.split(line)[1:]]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])


def _debian_packages(script: str) -> set[str]:
    text = (ROOT / script).read_text()
    return set(re.findall(r"([a-z0-9][a-z0-9.+-]+):\"", text))


def test_readme_names_what_the_test_command_installs_and_starts() -> None:
    warning = README.split("**Before running the second one**", 1)[1].split("## ", 1)[0]
    packages = set().union(*(_debian_packages(script) for script in TEST_SCRIPTS))
    assert {"postgresql", "mariadb-server", "nodejs", "openjdk-17-jre-headless"} <= packages
    missing = sorted(p for p in packages if f"`{p}`" not in warning)
    assert missing == [], f"README does not say that scripts/test.sh installs {missing}"
    for started in ("PostgreSQL", "MariaDB"):
        assert started in warning
    assert "starts PostgreSQL and MariaDB" in warning
