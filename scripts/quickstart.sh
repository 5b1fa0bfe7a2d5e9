#!/usr/bin/env bash
# Installs stanpkg into ./.venv on a fresh Debian 12 machine (Python 3.11) and runs the
# streaming server with the embedded NATS server and the memory store. Extra arguments
# are server flags (e.g. -p 4223 -m 8222).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_debian_packages python3-venv:"python3 -c 'import ensurepip, venv'"
ensure_venv
.venv/bin/pip install --quiet --disable-pip-version-check .
exec .venv/bin/stanpkg run -sc config_examples/quickstart.conf "$@"
