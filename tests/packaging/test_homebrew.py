"""The Homebrew formula, checked offline: Ruby syntax, rubocop with Homebrew's style
settings, its shape (virtualenv resources, service and test blocks), and the url/sha256 of
dist/stanpkg.rb against the sdist that `make dist` built."""

from __future__ import annotations

import hashlib
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.packaging.fixtures import ROOT, VERSION, build_dir, dist_dir, load_script, need_tools

HOMEBREW = ROOT / "packaging" / "homebrew"
FORMULA = HOMEBREW / "stanpkg.rb"


def _ruby_syntax(path: Path) -> None:
    need_tools("ruby")
    proc = subprocess.run(["ruby", "-c", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and "Syntax OK" in proc.stdout, proc.stderr


def test_formula_syntax() -> None:
    _ruby_syntax(FORMULA)


def test_formula_rubocop_homebrew_style() -> None:
    need_tools("rubocop")
    proc = subprocess.run(
        ["rubocop", "--config", str(HOMEBREW / ".rubocop.yml"), "--format", "simple", str(FORMULA)],
        capture_output=True,
        text=True,
        cwd=HOMEBREW,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_formula_shape() -> None:
    text = FORMULA.read_text()
    assert "include Language::Python::Virtualenv" in text
    assert 'depends_on "nats-server"' in text  # Homebrew's binary, not the wheel's
    assert re.search(
        r"service do\n\s+run \[opt_bin/\"stanpkg\", \"run\", \"-sc\", etc/\"stanpkg/stan.conf\"\]",
        text,
    )
    # Built compiled, and its test says so.
    install_block = text.split("def install", 1)[1].split("\n  end\n", 1)[0]
    assert install_block.index('ENV["STANPKG_COMPILE"] = "1"') < install_block.index(
        "venv.pip_install buildpath"
    )
    test_block = text.split("test do", 1)[1]
    assert 'assert_match "hot path: compiled (mypyc)"' in test_block
    assert "stanpkg validate" in test_block and "spawn" in test_block  # really starts it
    for block in re.findall(r'resource "[^"]+" do\n(.*?)\n  end', text, re.S):
        assert re.search(r'url "https://files\.pythonhosted\.org/\S+\.tar\.gz"', block), block
        assert re.search(r'sha256 "[0-9a-f]{64}"', block), block


def test_render_sets_url_and_sha256_of_the_sdist() -> None:
    sdist = b"not really a tarball"
    render = load_script("packaging/homebrew/render_formula.py").render
    out = render(FORMULA.read_text(), "9.9.9", sdist)
    assert (
        'url "https://files.pythonhosted.org/packages/source/s/stanpkg/stanpkg-9.9.9.tar.gz"' in out
    )
    assert f'  sha256 "{hashlib.sha256(sdist).hexdigest()}"' in out
    # Resources untouched.
    assert out.split('resource "', 1)[1] == FORMULA.read_text().split('resource "', 1)[1]


@pytest.mark.slow
def test_built_formula_matches_the_built_sdist(formula_file: Path) -> None:
    text = formula_file.read_text()
    sdist = dist_dir() / f"stanpkg-{VERSION}.tar.gz"
    url = re.search(r'(?m)^  url "([^"]+)"$', text)
    sha = re.search(r'(?m)^  sha256 "([0-9a-f]{64})"$', text)
    assert url and sha
    assert url.group(1).endswith("/" + sdist.name)
    assert sha.group(1) == hashlib.sha256(sdist.read_bytes()).hexdigest()
    _ruby_syntax(formula_file)


@pytest.mark.slow
def test_resources_cover_the_dependencies(python_dist: Path) -> None:
    """One resource per dependency in the wheelhouse, at the same version, except those
    Homebrew provides as formulae."""
    update = load_script("packaging/homebrew/update_resources.py")
    from_formulae, wheelhouse = update.FROM_FORMULAE, build_dir() / "wheelhouse"

    text = FORMULA.read_text()
    resources = dict(
        re.findall(r'resource "([^"]+)" do\n    url "[^"]*/[^/"]+-([^-/"]+)\.tar\.gz"', text)
    )
    for wheel in wheelhouse.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        name = name.replace("_", "-").lower()
        if name not in from_formulae:
            assert resources.get(name) == version, f"{name} {version}: run update_resources.py"
    assert zipfile.is_zipfile(next(wheelhouse.glob("stanpkg-*.whl")))
