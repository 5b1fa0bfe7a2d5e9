#!/usr/bin/env bash
# Installs stanpkg into ./.venv on a fresh Debian 12 machine (Python 3.11) and runs the
# streaming server with the embedded NATS server and the memory store. Extra arguments
# are server flags (e.g. -p 4223 -m 8222).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# gcc and the Python headers: pip then builds the compiled hot path (about twice the pure
# build's speed); without them it installs pure Python (docs/install.md).
need_debian_packages python3-venv:"python3 -c 'import ensurepip, venv'" \
    gcc:"command -v gcc" \
    python3-dev:"python3 -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_path(\"include\") + \"/Python.h\")'"
ensure_venv
.venv/bin/pip install --quiet --disable-pip-version-check .
.venv/bin/stanpkg --version | tail -n 1   # hot path: compiled (mypyc), or why it is pure
exec .venv/bin/stanpkg run -sc config_examples/quickstart.conf "$@"
