#!/usr/bin/env bash
# dist/stanpkg-VERSION.tar.gz and dist/stanpkg-VERSION-py3-none-any.whl; the wheelhouse
# (the wheel plus every dependency, as wheels for this machine: the nupkg and formula take
# their pins from it); and the Linux wheelhouse the deb and rpm ship, from which their
# venv is made at install time: every dependency and the bundled extras as wheels for each
# CPython in LINUX_PYTHONS, plus pip to install them (nothing touches an index there).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
rm -f "$DIST"/stanpkg-*.whl "$DIST"/stanpkg-*.tar.gz
# Isolated build, as a user's pip would do it: pyproject's build requirements only.
"$PY" -m build --sdist --wheel --outdir "$DIST" . >"$BUILD/build-python.log" 2>&1 \
    || { cat "$BUILD/build-python.log" >&2; exit 1; }
rm -rf "$BUILD/wheelhouse"
# With the SQL drivers: the nupkg and the formula install them too.
"$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --dest "$BUILD/wheelhouse" "$DIST/stanpkg-$VERSION-py3-none-any.whl[postgres,mysql]" \
    2>>"$BUILD/build-python.log"

# Debian 12 and Ubuntu 22.04 (python3.11), Ubuntu 24.04 (3.12), Debian 13 (3.13). glibc
# 2.34 or newer (Ubuntu 22.04 has 2.35): the manylinux tags pip may take, and the deb/rpm
# dependency on it.
LINUX_PYTHONS="3.11 3.12 3.13"
platforms=(--platform manylinux2014_x86_64)  # pip adds manylinux2010/1, not the 2_X ones
for glibc in $(seq 17 34); do platforms+=(--platform "manylinux_2_${glibc}_x86_64"); done
linux="$BUILD/wheelhouse-linux"
rm -rf "$linux"
for v in $LINUX_PYTHONS; do
    "$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
        --implementation cp --python-version "$v" --abi "cp${v/./}" \
        "${platforms[@]}" --dest "$linux" \
        "$DIST/stanpkg-$VERSION-py3-none-any.whl[postgres,mysql,crc]" pip 2>>"$BUILD/build-python.log"
done
# stanpkg compiled (STANPKG_COMPILE=1, docs/install.md) for the CPython that builds it, from
# the sdist: pip on a host with that Python takes it over the pure wheel, the others
# install the pure one. Its extension modules need glibc 2.14 symbols only.
STANPKG_COMPILE=1 "$PY" -m pip wheel --quiet --disable-pip-version-check --no-deps \
    --wheel-dir "$linux" "$DIST/stanpkg-$VERSION.tar.gz" >>"$BUILD/build-python.log" 2>&1 \
    || { cat "$BUILD/build-python.log" >&2; exit 1; }
echo "$LINUX_PYTHONS" >"$linux/PYTHON_VERSIONS"
ls "$DIST"/stanpkg-"$VERSION"*
