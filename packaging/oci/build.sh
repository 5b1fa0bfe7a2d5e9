#!/usr/bin/env bash
# dist/stanpkg-VERSION-oci.tar: the container image, as an OCI image layout archive
# (`podman load -i`, `docker load -i`, `skopeo copy oci-archive:...`), built without a
# container engine: a Debian 12 root file system (debootstrap) with stanpkg's venv in
# /opt/stanpkg, made by make-venv from the Linux wheelhouse of build-python.sh (the
# compiled CPython 3.11 build), packed as one layer by umoci; image_config.py sets how it
# runs. Needs root (debootstrap, chroot) and the Debian mirror. Run build-python.sh first.
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/../lib.sh"
wheelhouse="$BUILD/wheelhouse-linux"
[ -d "$wheelhouse" ] || { echo "no wheelhouse: run packaging/build-python.sh" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "the OCI image needs root (debootstrap, chroot)" >&2; exit 1; }
work="$BUILD/oci"
rootfs="$work/rootfs"
layout="$work/layout"
log="$work/build.log"
rm -rf "$work"
mkdir -p "$work"
run() { "$@" >>"$log" 2>&1 || { tail -40 "$log" >&2; echo "failed: $*" >&2; exit 1; }; }
in_root() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

# Debian 12 with its python3.11 (the compiled wheel's Python) and CA certificates (TLS).
run debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" \
    "$(bash "$ROOT/packaging/debian-mirror.sh")"

# The service user, with a fixed ID (the image config names it): it owns /data only.
# /data is also group 0's, read-write: platforms that run images as an arbitrary user
# with group 0 (OpenShift) can write it too. Nothing else is written by the server.
run in_root groupadd --system --gid 10001 stanpkg
run in_root useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
    --shell /usr/sbin/nologin stanpkg
install -d -m 0770 -o 10001 -g 0 "$rootfs/data"
install -D -m 0644 "$ROOT/packaging/oci/stan.conf" "$rootfs/etc/stanpkg/stan.conf"
# stanpkg run with the configuration file above, the container's arguments after it.
install -D -m 0755 "$ROOT/packaging/oci/entrypoint.sh" "$rootfs/usr/local/bin/stanpkg-entrypoint"

# The venv, as the deb's postinst makes it, from the bundled wheels and no index.
mkdir -p "$rootfs/tmp/wheels"
cp "$wheelhouse"/* "$rootfs/tmp/wheels/"
cp "$ROOT/packaging/make-venv.sh" "$rootfs/tmp/make-venv"
run in_root STANPKG_WHEELS=/tmp/wheels STANPKG_PREFIX=/opt/stanpkg \
    STANPKG_EXTRAS_FILE=/tmp/extras PIP_NO_INDEX=1 sh /tmp/make-venv
version_line=$(in_root /opt/stanpkg/bin/stanpkg --version | tail -n 1)
echo "$version_line" >>"$log"

# What a running server never reads: package caches and lists, docs, logs, the build's leftovers.
rm -rf "$rootfs"/tmp/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
    "$rootfs"/usr/share/info/*
find "$rootfs/var/log" -type f -delete

tag="stanpkg:$VERSION"  # the reference podman load names the image by (localhost/stanpkg:V)
run umoci init --layout "$layout"
run umoci new --image "$layout:$tag"
run umoci unpack --image "$layout:$tag" "$work/bundle"
rm -rf "$work/bundle/rootfs"
mv "$rootfs" "$work/bundle/rootfs"
run umoci repack --image "$layout:$tag" "$work/bundle"
run "$PY" "$ROOT/packaging/oci/image_config.py" "$layout" "$tag" "$VERSION"
run umoci gc --layout "$layout"
out="$DIST/stanpkg-$VERSION-oci.tar"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -C "$layout" -cf "$out" .
rm -rf "$work/bundle"
echo "$out ($version_line)"
