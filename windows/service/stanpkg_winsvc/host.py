"""Entry point the Service Control Manager starts (see logic.host_command): run by the base
interpreter, it first puts the venv's site-packages (and pywin32's .pth) on sys.path."""

from __future__ import annotations

import site
import sys
from pathlib import Path


def _bootstrap(argv: list[str]) -> None:
    venv = argv[argv.index("--venv") + 1] if "--venv" in argv else ""
    site.addsitedir(str(Path(venv, "Lib", "site-packages")))


if __name__ == "__main__":
    _bootstrap(sys.argv[1:])
    from stanpkg_winsvc.winservice import host_main

    sys.exit(host_main(sys.argv[1:]))
