#!/usr/bin/env bash
# dist/stanpkg-VERSION.tar.gz and dist/stanpkg-VERSION-py3-none-any.whl, and the wheelhouse
# (the wheel plus every dependency, as wheels for Linux/CPython 3.11) that the deb and rpm
# venvs are installed from without touching an index at package build time.
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
rm -f "$DIST"/stanpkg-*.whl "$DIST"/stanpkg-*.tar.gz
# Isolated build, as a user's pip would do it: pyproject's build requirements only.
"$PY" -m build --sdist --wheel --outdir "$DIST" . >"$BUILD/build-python.log" 2>&1 \
    || { cat "$BUILD/build-python.log" >&2; exit 1; }
rm -rf "$BUILD/wheelhouse"
"$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --dest "$BUILD/wheelhouse" "$DIST/stanpkg-$VERSION-py3-none-any.whl" 2>>"$BUILD/build-python.log"
ls "$DIST"/stanpkg-"$VERSION"*
