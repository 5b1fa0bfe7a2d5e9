#!/usr/bin/env bash
# Builds the compiled stanpkg wheel for the CPython of a Debian release inside a chroot of
# that release, for a build machine that lacks that Python: build-python.sh calls it for
# CPython 3.13 (Debian 13, trixie) when none is found here. Needs root (debootstrap,
# chroot) and the Debian mirror; the chroot is kept under build/packaging and used again.
# usage: build-in-debian.sh SUITE SDIST OUTDIR
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -eq 3 ] || { echo "usage: build-in-debian.sh SUITE SDIST OUTDIR" >&2; exit 2; }
suite=$1 sdist=$2 out=$3
[ "$(id -u)" -eq 0 ] || { echo "building in a $suite chroot needs root" >&2; exit 1; }
root="$BUILD/chroot-$suite"
if [ ! -x "$root/usr/bin/gcc" ]; then
    rm -rf "$root"
    debootstrap --variant=minbase --include=python3,python3-dev,python3-venv,gcc,libc6-dev,ca-certificates \
        "$suite" "$root" "$(bash "$ROOT/packaging/debian-mirror.sh")" >"$BUILD/chroot-$suite.log" 2>&1 \
        || { tail -20 "$BUILD/chroot-$suite.log" >&2; exit 1; }
fi
work="$root/tmp/stanpkg-build"
rm -rf "$work"
mkdir -p "$work/out"
cp "$sdist" "$ROOT/packaging/constraints-build.txt" "$work/"
# pip fetches the build tools from the index, trusting what pip on this host trusts.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$work/ca.crt"
# The same isolated, pinned build as on the host: a venv of the release's python3.
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 \
    SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" STANPKG_COMPILE=1 PIP_CERT=/tmp/stanpkg-build/ca.crt \
    PIP_CONSTRAINT=/tmp/stanpkg-build/constraints-build.txt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    sh -ec 'python3 -m venv /tmp/stanpkg-build/venv
        /tmp/stanpkg-build/venv/bin/python -m pip wheel --quiet --no-deps --no-cache-dir \
            --wheel-dir /tmp/stanpkg-build/out /tmp/stanpkg-build/'"$(basename "$sdist")"
mkdir -p "$out"
cp "$work"/out/*.whl "$out/"
rm -rf "$work"
