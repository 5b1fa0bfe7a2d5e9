"""ansible-lint (production profile) is clean on the role and playbooks."""

from __future__ import annotations

import subprocess

from tests.ansible.ansible_run import ANSIBLE_DIR, BIN, env
from tests.packaging.fixtures import need_tools


def test_ansible_lint_clean() -> None:
    need_tools("ansible-lint")
    proc = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
        cwd=ANSIBLE_DIR,
        capture_output=True,
        text=True,
        env=env(),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failure(s), 0 warning(s)" in proc.stderr + proc.stdout
