#!/usr/bin/env bash
# stage-venv.sh DESTDIR PREFIX WHEELHOUSE: the application venv for PREFIX (/opt/stanpkg),
# built under DESTDIR (the package's staging root) from the wheelhouse only, on Debian's
# /usr/bin/python3.11, then made relocatable to PREFIX: no path of the build stays inside.
# Shared by debian/rules and the rpm spec, so both packages hold the same tree.
set -euo pipefail
destdir=$1 prefix=$2 wheelhouse=$3
python=${STANPKG_PYTHON:-/usr/bin/python3.11}
venv="$destdir$prefix"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
    --no-compile --find-links "$wheelhouse" stanpkg
# pip/setuptools came from ensurepip for the install only: not part of the application.
"$venv/bin/python" -m pip uninstall --quiet --yes pip setuptools
# bin/ keeps the application's commands, nats-server and the interpreter links only: the
# dependencies' own console scripts (jsonschema, idna, ...) are not part of stanpkg.
find "$venv/bin" -mindepth 1 \( -type f -o -type l \) \
    ! -name stanpkg ! -name nats-streaming-server ! -name nats-server ! -name 'python*' -delete
rm -rf "$venv/include"  # empty: no wheel here builds C extensions against the venv
# Some wheels mark modules and metadata executable; under lib/ only shared objects are.
find "$venv/lib" -type f -perm /111 ! -name '*.so' ! -name '*.so.*' -exec chmod a-x {} +
# direct_url.json records the build's wheelhouse path; without it pip lists plain installs.
find "$venv" -name direct_url.json -delete
find "$venv" -name __pycache__ -prune -exec rm -rf {} +
# Shebangs and pyvenv.cfg name the staging path: point them at the installed one.
grep -rlI --null -F "$venv" "$venv" | xargs -0 -r sed -i "s|$venv|$prefix|g"
if grep -rqI -F "$destdir" "$venv"; then
    echo "stage-venv: build path left in $venv" >&2
    exit 1
fi
