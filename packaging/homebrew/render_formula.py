"""dist/stanpkg.rb: the formula of packaging/homebrew/stanpkg.rb for the sdist in dist/.

Sets the formula's own ``url`` (PyPI's canonical source address for the version, where the
sdist is published) and ``sha256`` (of dist/stanpkg-VERSION.tar.gz), as ``brew bump-formula-pr``
would; the resources stay as update_resources.py wrote them.
"""

from __future__ import annotations

import hashlib
import re
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
URL = "https://files.pythonhosted.org/packages/source/s/stanpkg/stanpkg-{version}.tar.gz"
# The formula's own url/sha256 are the two-space-indented ones (resources use four).
TOP_URL = re.compile(r'(?m)^  url "[^"]*"$')
TOP_SHA = re.compile(r'(?m)^  sha256 "[0-9a-f]{64}"$')


def render(template: str, version: str, sdist: bytes) -> str:
    digest = hashlib.sha256(sdist).hexdigest()
    text, n_url = TOP_URL.subn(f'  url "{URL.format(version=version)}"', template, count=1)
    text, n_sha = TOP_SHA.subn(f'  sha256 "{digest}"', text, count=1)
    if (n_url, n_sha) != (1, 1):
        raise ValueError("the formula has no top-level url/sha256 line")
    return text


def main() -> int:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    sdist = ROOT / "dist" / f"stanpkg-{version}.tar.gz"
    out = ROOT / "dist" / "stanpkg.rb"
    out.write_text(render((HERE / "stanpkg.rb").read_text(), version, sdist.read_bytes()))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
