# Shared by the packaging scripts (sourced): paths and the version, from pyproject.toml.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST="$ROOT/dist"
BUILD="$ROOT/build/packaging"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
VERSION=$("$PY" -c 'import tomllib,sys; print(tomllib.load(open(sys.argv[1],"rb"))["project"]["version"])' "$ROOT/pyproject.toml")
# Package revision of the deb/rpm (bump for packaging-only changes).
RELEASE="${STANPKG_RELEASE:-1}"
# Reproducible archives: every build of one commit gives the same bytes where the tools allow.
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 1700000000)}"
export ROOT DIST BUILD PY VERSION RELEASE SOURCE_DATE_EPOCH
mkdir -p "$DIST" "$BUILD"
