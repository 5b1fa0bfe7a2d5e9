#!/usr/bin/env bash
# Starts the PostgreSQL and MariaDB servers that the SQL-store tests use (Debian 12, no
# systemd needed): installs them when missing, keeps them on 127.0.0.1, creates the role
# and database "stanpkg_test" owned by user stanpkg (password stanpkg), and prints the DSNs
# as shell export lines. Safe to re-run: anything already in place is left alone.
#
#     eval "$(scripts/start-databases.sh)"    # sets STANPKG_TEST_PG_DSN / _MYSQL_DSN
#
# The tests create a schema (PostgreSQL) or database (MariaDB, named stanpkg_*) per run,
# so the role owns stanpkg_test and has all rights on `stanpkg\_%`.*. Both servers commit
# without an fsync per transaction (test speed: their own crash is not what is tested).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

DB_USER=stanpkg
DB_PASSWORD=stanpkg
DB_NAME=stanpkg_test

log() { echo "start-databases: $*" >&2; }

need_debian_packages postgresql:"command -v pg_ctlcluster" \
    mariadb-server:"command -v mariadbd || command -v mysqld"

# -- PostgreSQL ----------------------------------------------------------------------------
start_postgres() {
    local version cluster_line port status
    version=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
    cluster_line=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"')
    if [ -z "$cluster_line" ]; then
        log "creating PostgreSQL $version cluster main"
        as_root pg_createcluster "$version" main >/dev/null
        cluster_line=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"')
    fi
    port=$(echo "$cluster_line" | awk '{print $3}')
    status=$(echo "$cluster_line" | awk '{print $4}')
    # A drop-in file (postgresql.conf includes conf.d/) keeps the main file untouched.
    # synchronous_commit=off: commits are not fsync'ed one by one (a crash of PostgreSQL
    # itself may lose the last ones; a crash of the streaming server loses nothing).
    local dropin="/etc/postgresql/$version/main/conf.d/stanpkg-tests.conf"
    local wanted="listen_addresses = '127.0.0.1'
synchronous_commit = off"
    if [ "$(cat "$dropin" 2>/dev/null)" != "$wanted" ]; then
        echo "$wanted" | as_root tee "$dropin" >/dev/null
        if [ "$status" = online ]; then as_root pg_ctlcluster "$version" main restart; fi
    fi
    if [ "$status" != online ]; then
        log "starting PostgreSQL $version on 127.0.0.1:$port"
        # After an unclean stop the old postmaster's children may still hold the socket
        # lock for a moment: retry rather than fail the whole run.
        local attempt
        for attempt in 1 2 3 4 5 6 7 8 9 10; do
            as_root pg_ctlcluster "$version" main start && break
            [ "$attempt" -lt 10 ] || return 1
            sleep 1
        done
    fi
    local psql=(as_root runuser -u postgres -- psql -q -p "$port" -v ON_ERROR_STOP=1 -tA)
    if [ -z "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname='$DB_USER'")" ]; then
        "${psql[@]}" -c "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD'"
    fi
    if [ -z "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname='$DB_NAME'")" ]; then
        "${psql[@]}" -c "CREATE DATABASE $DB_NAME OWNER $DB_USER"
    fi
    PG_DSN="host=127.0.0.1 port=$port user=$DB_USER password=$DB_PASSWORD dbname=$DB_NAME sslmode=disable"
}

# -- MariaDB -------------------------------------------------------------------------------
start_mariadb() {
    # innodb_flush_log_at_trx_commit=2: as synchronous_commit=off above.
    local conf="/etc/mysql/mariadb.conf.d/99-stanpkg-tests.cnf"
    local wanted="[mysqld]
bind-address = 127.0.0.1
innodb_flush_log_at_trx_commit = 2
skip-name-resolve"
    if [ -d "$(dirname "$conf")" ] && [ "$(cat "$conf" 2>/dev/null)" != "$wanted" ]; then
        echo "$wanted" | as_root tee "$conf" >/dev/null
        if as_root mariadb-admin ping --silent >/dev/null 2>&1; then
            as_root mariadb-admin shutdown
        fi
    fi
    if ! as_root mariadb-admin ping --silent >/dev/null 2>&1; then
        log "starting MariaDB on 127.0.0.1:3306"
        if [ -x /etc/init.d/mariadb ]; then
            as_root /etc/init.d/mariadb start >/dev/null
        else
            as_root mkdir -p /run/mysqld
            as_root chown mysql:mysql /run/mysqld
            (as_root mysqld_safe --bind-address=127.0.0.1 >/dev/null 2>&1 &)
        fi
        for _ in $(seq 1 60); do
            as_root mariadb-admin ping --silent >/dev/null 2>&1 && break
            sleep 0.5
        done
        as_root mariadb-admin ping --silent >/dev/null
    fi
    as_root mariadb -e "
        CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
        CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
        CREATE DATABASE IF NOT EXISTS $DB_NAME;
        GRANT ALL PRIVILEGES ON \`stanpkg\\_%\`.* TO '$DB_USER'@'127.0.0.1';
        GRANT ALL PRIVILEGES ON \`stanpkg\\_%\`.* TO '$DB_USER'@'localhost';"
    MYSQL_DSN="$DB_USER:$DB_PASSWORD@tcp(127.0.0.1:3306)/$DB_NAME"
}

# Only the export lines may reach stdout (the caller evals it): what the tools print goes to
# stderr (pg_ctlcluster says "Removed stale pid file." after an unclean stop). A redirection
# rather than a saved descriptor, which the started daemons would inherit and hold open.
start_postgres >&2
start_mariadb >&2
printf "export STANPKG_TEST_PG_DSN='%s'\n" "$PG_DSN"
printf "export STANPKG_TEST_MYSQL_DSN='%s'\n" "$MYSQL_DSN"
