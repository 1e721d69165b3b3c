#!/bin/sh
# The official postgres image's start, in short: as root, read the password file and hand the
# data directory to postgres; as postgres, on an empty data directory, make the cluster with
# POSTGRES_USER as its superuser and POSTGRES_DB, password authentication over TCP; then serve.
set -eu
if [ "$(id -u)" = 0 ]; then
    if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
        POSTGRES_PASSWORD=$(cat "$POSTGRES_PASSWORD_FILE")
        export POSTGRES_PASSWORD
        unset POSTGRES_PASSWORD_FILE
    fi
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    exec runuser -u postgres -- /bin/sh "$0" "$@"
fi
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE}"
    password_file=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$password_file"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$password_file" \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 >/dev/null
    rm -f "$password_file"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$database" != postgres ]; then
        echo "CREATE DATABASE \"$database\"" | postgres --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "entrypoint: made the cluster in $PGDATA: superuser $user, database $database"
fi
unset POSTGRES_PASSWORD
exec postgres -c listen_addresses='*' "$@"
