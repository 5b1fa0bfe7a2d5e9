#!/usr/bin/env bash
# Prints the Debian mirror apt on this host is configured with (the one it reaches), for
# debootstrap: the OCI image's root file system and the test containers.
set -euo pipefail
for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    mirror=$(awk '/^URIs:/ && /\/debian/ && !/security/ {print $2; exit}' "$f")
    if [ -n "$mirror" ]; then echo "$mirror"; exit 0; fi
done
if [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && !/security/ {for (i = 2; i <= NF; i++) if ($i ~ /^http/) {print $i; exit}}' /etc/apt/sources.list)
    if [ -n "$mirror" ]; then echo "$mirror"; exit 0; fi
fi
echo "http://deb.debian.org/debian"
