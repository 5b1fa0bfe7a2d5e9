#!/usr/bin/env bash
# dist/stanpkg_VERSION-RELEASE_amd64.deb with debhelper, from the Linux wheelhouse of
# build-python.sh (run it first; `make deb` does).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/../lib.sh"
wheelhouse="$BUILD/wheelhouse-linux"
[ -d "$wheelhouse" ] || { echo "no wheelhouse: run packaging/build-python.sh" >&2; exit 1; }

# A minimal source tree: debian/ plus the files the package installs (not the whole repo).
src="$BUILD/deb/stanpkg-$VERSION"
rm -rf "$BUILD/deb"
mkdir -p "$src/packaging" "$src/docs"
cp -r "$ROOT/packaging/deb/debian" "$src/debian"
cp -r "$ROOT/packaging/files" "$ROOT/packaging/man" "$ROOT/packaging/make-venv.sh" "$src/packaging/"
cp "$ROOT"/docs/configuration.md "$ROOT"/docs/validate.md "$ROOT"/docs/install.md \
    "$ROOT"/docs/operations.md "$ROOT"/docs/pipeline.md "$src/docs/"
cp "$ROOT/packaging/files/stanpkg.service" "$src/debian/stanpkg.service"
for unit in service timer; do
    cp "$ROOT/packaging/systemd/stanpkg-export.$unit" "$src/debian/stanpkg.stanpkg-export.$unit"
done
cp "$ROOT/packaging/files/stanpkg.logrotate" "$src/debian/stanpkg.logrotate"
date=$(date -R -u -d "@$SOURCE_DATE_EPOCH")
sed -e "s/@VERSION@/$VERSION/g" -e "s/@RELEASE@/$RELEASE/g" -e "s/@DATE@/$date/" \
    "$src/debian/changelog.in" >"$src/debian/changelog"
rm "$src/debian/changelog.in"

(cd "$src" && STANPKG_WHEELHOUSE="$wheelhouse" dpkg-buildpackage -b -us -uc \
    >"$BUILD/deb/build.log" 2>&1) || { tail -40 "$BUILD/deb/build.log" >&2; exit 1; }
deb="stanpkg_${VERSION}-${RELEASE}_amd64.deb"
mv "$BUILD/deb/$deb" "$DIST/$deb"
echo "$DIST/$deb"
