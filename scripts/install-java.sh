#!/usr/bin/env bash
# Installs a Java runtime for Spark (the data pipeline and its tests) when `java` is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_debian_packages openjdk-17-jre-headless:"command -v java"
java -version 2>&1 | head -1
