"""The compiled build: when the build backend decides to compile (packaging/build_backend,
``STANPKG_COMPILE``), the modules of stanpkg/hot_path.py are compiled with mypyc into a
wheel for this platform and Python; otherwise the wheel is pure Python. Everything else is
in pyproject.toml."""

import os
import runpy
import sys
from pathlib import Path

from setuptools import setup

# The build's own mypy settings: mypyc type-checks only to compile, against what the build
# environment holds (no stubs, no runtime dependencies), so a missing third-party type is
# Any here rather than an error. The strict check of the code is the project's own mypy run.
MYPYC_CONFIG = os.path.join("packaging", "build_backend", "mypyc.ini")

ext_modules = []
if os.environ.get("STANPKG_COMPILE") == "1":
    import mypyc
    from mypyc.build import mypycify  # a build requirement only then (build_backend)

    # An in-tree build reuses build/: a module compiled by an earlier build and no longer
    # listed would be packed again and shadow its source.
    for stale in Path("build").glob("lib.*/**/*.so"):
        stale.unlink()
    hot_path = runpy.run_path(os.path.join("stanpkg", "hot_path.py"))
    try:
        ext_modules = mypycify(
            ["--config-file", MYPYC_CONFIG, *hot_path["source_paths"]()],
            opt_level="3",
            group_name="stanpkg_hot_path",
        )
    except BaseException:
        print(
            "stanpkg build: compiling the hot path failed (above); "
            "STANPKG_COMPILE=0 builds the pure Python package instead",
            file=sys.stderr,
        )
        raise
    # Reproducible: the build directory and the build environment (pip makes both with
    # random names) stay out of the objects' debug information and __FILE__ strings, so
    # one commit builds the same bytes each time.
    mypyc_dir = os.path.dirname(mypyc.__file__)
    for extension in ext_modules:
        extension.extra_compile_args += [
            f"-ffile-prefix-map={os.getcwd()}=.",
            f"-ffile-prefix-map={mypyc_dir}=mypyc",
        ]

setup(ext_modules=ext_modules)
