#!/usr/bin/env bash
# dist/stanpkg-VERSION-RELEASE.x86_64.rpm with rpmbuild, from the sdist and Linux wheelhouse of
# build-python.sh (run it first; `make rpm` does).
set -euo pipefail
# shellcheck source=packaging/lib.sh
. "$(dirname "$0")/../lib.sh"
wheelhouse="$BUILD/wheelhouse-linux"
[ -d "$wheelhouse" ] || { echo "no wheelhouse: run packaging/build-python.sh" >&2; exit 1; }
top="$BUILD/rpm"
rm -rf "$top"
mkdir -p "$top"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
cp "$DIST/stanpkg-$VERSION.tar.gz" "$ROOT"/packaging/files/{stanpkg.service,stan.conf,stanpkg.logrotate} \
    "$ROOT"/packaging/files/{archive-slice,stanpkg.sysusers} "$ROOT"/packaging/systemd/stanpkg-export.* \
    "$ROOT/packaging/make-venv.sh" "$ROOT"/packaging/man/*.1 \
    "$top/SOURCES/"
# The licence text, from Debian's copy (base-files) on the build host.
cp /usr/share/common-licenses/Apache-2.0 "$top/SOURCES/LICENSE"
cp "$ROOT/packaging/rpm/stanpkg.spec" "$top/SPECS/"
rpmbuild -bb --quiet \
    --define "_topdir $top" \
    --define "pkg_version $VERSION" \
    --define "pkg_release $RELEASE" \
    --define "wheelhouse $wheelhouse" \
    --define "_buildhost stanpkg-build" \
    --define "use_source_date_epoch_as_buildtime 1" \
    "$top/SPECS/stanpkg.spec" >"$top/build.log" 2>&1 || { tail -40 "$top/build.log" >&2; exit 1; }
rpm_file="stanpkg-$VERSION-$RELEASE.x86_64.rpm"
mv "$top/RPMS/x86_64/$rpm_file" "$DIST/$rpm_file"
echo "$DIST/$rpm_file"
