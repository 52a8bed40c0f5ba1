#!/bin/sh
# Entrypoint of the minimal PostgreSQL image scripts/pg-image.sh builds from
# the host's Debian PostgreSQL files. It is the part of the official image's
# docker-entrypoint.sh that testcontainers' postgres module relies on:
# POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB and POSTGRES_HOST_AUTH_METHOD
# on first start, `postgres -c ...` as the command, and a restart (docker
# start after docker kill) that finds the data directory and runs crash
# recovery. Only dash's builtins and the PostgreSQL binaries are used: the
# image has no coreutils.
set -e
: "${PGDATA:=/var/lib/postgresql/data}"
if [ "${1#-}" != "$1" ]; then
  set -- postgres "$@"
fi
if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    method=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
    umask 077
    printf '%s\n' "$POSTGRES_PASSWORD" >/tmp/pwfile
    umask 022
    pw=--pwfile=/tmp/pwfile
  else
    method=${POSTGRES_HOST_AUTH_METHOD:-trust}
    echo "docker-entrypoint: no POSTGRES_PASSWORD: host connections use $method" >&2
    pw=
  fi
  # --no-sync: a container that is killed is a crashed process, not a lost
  # machine; the host's page cache keeps what was written.
  initdb -D "$PGDATA" -U "$user" $pw --auth-local=trust --auth-host="$method" \
    -E UTF8 --locale=C --no-sync --no-instructions >/dev/null
  [ -n "$pw" ] && : >/tmp/pwfile
  printf 'host all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    printf 'CREATE DATABASE "%s";\n' "$db" | postgres --single -j -D "$PGDATA" postgres >/dev/null
  fi
  echo "docker-entrypoint: PostgreSQL init process complete; ready for start up." >&2
fi
exec "$@"
