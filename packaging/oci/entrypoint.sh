#!/bin/sh
# The OCI image's entry point: `stanpkg run` with the image's configuration file and the
# container's arguments after it, so that `podman run IMAGE -cid orders` changes the
# cluster ID and keeps the FILE store in /data and the monitoring port of the health check
# (flags override the file, as on the command line). Arguments that name a configuration
# file of their own (-sc/--stan_config, or -c/--config, which stanpkg also reads the
# streaming options from) run with that file instead.
set -eu
for arg in "$@"; do
    case $arg in
        -sc | -sc=* | --sc | --sc=* | -stan_config | -stan_config=* | --stan_config | \
            --stan_config=* | -c | -c=* | --c | --c=* | -config | -config=* | --config | \
            --config=*)
            exec /opt/stanpkg/bin/stanpkg run "$@"
            ;;
    esac
done
exec /opt/stanpkg/bin/stanpkg run -sc /etc/stanpkg/stan.conf "$@"
