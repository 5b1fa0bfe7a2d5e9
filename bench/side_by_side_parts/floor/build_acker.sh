#!/usr/bin/env bash
# Builds acker.go (the floor of a sync publish round trip beside a separate nats-server)
# with the Go reference's vendored modules, into OUT_DIR/acker.
# usage: build_acker.sh NSS_GIT OUT_DIR   (NSS_GIT and OUT_DIR as for
#   ../shared/reference/build.sh; OUT_DIR is normally STANPKG_REFERENCE_DIR)
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,5p' "$0"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd); mkdir -p "$2"; out=$(cd "$2" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
git --git-dir="$1" archive --prefix=nss/ v0.23.2 | tar x -C "$tmp"
mkdir -p "$tmp/nss/cmd/acker" && cp "$here/acker.go" "$tmp/nss/cmd/acker/main.go"
cd "$tmp/nss" && GOFLAGS=-mod=vendor go build -o "$out/acker" ./cmd/acker
ls -l "$out/acker"
