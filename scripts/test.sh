#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian 12 machine (Python 3.11) and
# runs all the tests. Extra arguments go to pytest. .ci/run calls this script.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_debian_packages python3-venv:"python3 -c 'import ensurepip, venv'" \
    nodejs:"command -v node" npm:"command -v npm" \
    gcc:"command -v gcc" pkg-config:"command -v pkg-config" \
    libnats-dev:"pkg-config --exists libnats"   # the C STAN client (nats.c) of the client tests
ensure_venv
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
bash scripts/install-java.sh      # Spark (the pipeline tests) runs on Java 17
bash packaging/install-tools.sh test   # dpkg/rpm/lintian/debootstrap/ansible/... for packaging tests
# PostgreSQL and MariaDB on loopback for the SQL store tests; exports STANPKG_TEST_*_DSN.
# Assigned first so that a failure stops here (an eval of a failed substitution would not);
# only its export lines are evaluated.
database_env=$(bash scripts/start-databases.sh)
eval "$(grep -E "^export STANPKG_TEST_[A-Z_]+='[^']*'$" <<<"$database_env")"

# Third-party STAN client used by the integration tests (pinned by tests/js/package-lock.json).
if [ -f tests/js/package.json ]; then
    (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
fi

set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
