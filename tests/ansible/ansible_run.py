"""Running ansible-playbook / ansible-lint from the tests, with the role on the path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.packaging.fixtures import ROOT, need_tools

ANSIBLE_DIR = ROOT / "ansible"
PLAYBOOKS = Path(__file__).parent / "playbooks"
BIN = Path(sys.executable).parent


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.update(
        ANSIBLE_ROLES_PATH=str(ANSIBLE_DIR / "roles"),
        ANSIBLE_CONNECTION_PLUGINS=str(Path(__file__).parent / "plugins" / "connection"),
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_LOCAL_TEMP=str(Path(os.environ.get("TMPDIR", "/tmp")) / "stanpkg-ansible-local"),
        ANSIBLE_PYTHON_INTERPRETER="auto_silent",
        ANSIBLE_STDOUT_CALLBACK="default",
        ANSIBLE_CALLBACK_RESULT_FORMAT="yaml",
        ANSIBLE_FORCE_COLOR="0",
        PATH=f"{BIN}:{e.get('PATH', '')}",
    )
    return e


def playbook(
    book: Path,
    *,
    inventory: str | Path = "localhost,",
    extra: dict[str, Any] | None = None,
    tmp: Path,
    timeout: float = 900,
    args: list[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    need_tools("ansible-playbook")
    args = [str(BIN / "ansible-playbook"), "-i", str(inventory), str(book), *(args or [])]
    if extra is not None:
        varsfile = tmp / f"vars-{len(list(tmp.glob('vars-*.json')))}.json"
        varsfile.write_text(json.dumps(extra))
        args += ["-e", f"@{varsfile}"]
    return subprocess.run(args, capture_output=True, text=True, env=env(), timeout=timeout, cwd=tmp)


def recap(output: str) -> dict[str, int]:
    """The PLAY RECAP counters of the last host line (ok, changed, failed, ...)."""
    for line in reversed(output.splitlines()):
        if "ok=" in line and "changed=" in line:
            return {k: int(v) for k, v in (p.split("=") for p in line.split(":", 1)[1].split())}
    raise AssertionError(f"no PLAY RECAP in:\n{output[-3000:]}")
