"""The optional compiled build: ``STANPKG_COMPILE=1 pip install .`` (or ``python -m build``)
compiles the modules of stanpkg/hot_path.py with mypyc into a wheel for this platform and
Python. Without it the wheel is pure Python. Everything else is in pyproject.toml."""

import os
import runpy
from pathlib import Path

from setuptools import setup

ext_modules = []
if os.environ.get("STANPKG_COMPILE") == "1":
    from mypyc.build import mypycify  # a build requirement only then (build_backend.py)

    # An in-tree build reuses build/: a module compiled by an earlier build and no longer
    # listed would be packed again and shadow its source.
    for stale in Path("build").glob("lib.*/**/*.so"):
        stale.unlink()
    hot_path = runpy.run_path(os.path.join("stanpkg", "hot_path.py"))
    ext_modules = mypycify(hot_path["source_paths"](), opt_level="3", group_name="stanpkg_hot_path")

setup(ext_modules=ext_modules)
