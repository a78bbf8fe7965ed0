#!/usr/bin/env bash
# Creates the two databases of siteops' Temporal cluster and sets up or
# upgrades their schemas, the default store (postgresql/v12/temporal) and
# visibility (postgresql/v12/visibility), to the latest version the pinned
# temporal-sql-tool embeds, the way internal/cluster does for the tests. The
# schema jobs of deploy/compose.yaml and deploy/kubernetes/temporal run it
# before the services start; run it again after upgrading the server image.
#
# It is idempotent: create-database keeps a database that exists, setup-schema
# -v 0.0 leaves a versioned schema alone, and update-schema applies only the
# versions that are missing.
#
# It reads the variables the server's configuration
# (deploy/temporal/config/cluster.yaml) reads, with the same defaults:
#   TEMPORAL_SERVER_DB_HOST (127.0.0.1), TEMPORAL_SERVER_DB_PORT (5432),
#   TEMPORAL_SERVER_DB_USER (temporal), TEMPORAL_SERVER_DB_PASSWORD,
#   TEMPORAL_SERVER_DB_NAME (temporal),
#   TEMPORAL_SERVER_VISIBILITY_DB_NAME (temporal_visibility),
#   TEMPORAL_SERVER_DB_PLUGIN (postgres12)
# TEMPORAL_SERVER_DB_PASSWORD_FILE may name a file holding the password (a
# mounted secret) instead. The password reaches the tool in its environment
# (SQL_PASSWORD), never on a command line.
#
# The user needs no more than to own the two databases: with the roles of
# deploy/postgres-roles.sh it cannot create them (NOCREATEDB), finds them
# made, and sets up their schemas (btree_gin, the one extension the
# visibility schema creates, is trusted: a database owner may create it).
set -euo pipefail
# shellcheck source=secret-files.sh
. "$(dirname "${BASH_SOURCE[0]}")/secret-files.sh"
load_secret_files TEMPORAL_SERVER_DB_PASSWORD

host="${TEMPORAL_SERVER_DB_HOST:-127.0.0.1}"
port="${TEMPORAL_SERVER_DB_PORT:-5432}"
user="${TEMPORAL_SERVER_DB_USER:-temporal}"
plugin="${TEMPORAL_SERVER_DB_PLUGIN:-postgres12}"
SQL_PASSWORD="${TEMPORAL_SERVER_DB_PASSWORD:-}"
export SQL_PASSWORD

sql() {
  temporal-sql-tool --plugin "$plugin" --ep "$host" -p "$port" -u "$user" "$@"
}

for pair in \
  "${TEMPORAL_SERVER_DB_NAME:-temporal}=postgresql/v12/temporal" \
  "${TEMPORAL_SERVER_VISIBILITY_DB_NAME:-temporal_visibility}=postgresql/v12/visibility"; do
  db="${pair%%=*}"
  schema="${pair#*=}"
  # A database the DBA created for a user without CREATEDB cannot be
  # "created" again; setup-schema below says so if it does not exist either.
  if ! sql --db "$db" create-database; then
    echo "temporal-schema: could not create database $db on $host:$port as $user (it may exist already); setting up its schema" >&2
  fi
  sql --db "$db" setup-schema -v 0.0
  sql --db "$db" update-schema --schema-name "$schema"
  echo "temporal-schema: $db on $host:$port is at the latest $schema"
done
