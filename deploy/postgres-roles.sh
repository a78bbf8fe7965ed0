#!/usr/bin/env bash
# Creates the PostgreSQL roles and databases of siteops' deployment, each
# with least privilege, as an administrator (the DBA's job, done once and
# again to change a password; idempotent):
#
#   Temporal: the role TEMPORAL_SERVER_DB_USER (default temporal) owns the
#     databases TEMPORAL_SERVER_DB_NAME (temporal) and
#     TEMPORAL_SERVER_VISIBILITY_DB_NAME (temporal_visibility), and nothing
#     else; its password is TEMPORAL_SERVER_DB_PASSWORD (or _FILE). The same
#     variables the Temporal services and temporal-schema.sh read.
#   siteops: the role and database named in SITEOPS_DATABASE_URL (or _FILE),
#     the URL siteops itself reads (postgres://USER:PASSWORD@HOST:PORT/DB...):
#     the role owns that one database, where the worker and the ingress run
#     the store's migrations at start (DDL on its own schema, nothing else).
#
# Either part runs only when its password or URL is given, so a deployment
# whose Temporal and siteops live in different places (Kubernetes
# namespaces) runs it once for each. Every role is NOSUPERUSER NOCREATEDB
# NOCREATEROLE NOREPLICATION NOBYPASSRLS; CONNECT and TEMPORARY on each
# database are revoked from PUBLIC, so no other role (but superusers) may
# connect to it; each database's schema public is owned by its role, with
# no privilege for PUBLIC. (Databases made by others keep their own grants:
# PostgreSQL lets PUBLIC connect to the database postgres, where these roles
# own nothing.)
#
# The administrator's connection is psql's own: PGHOST, PGPORT, PGUSER,
# PGDATABASE, PGSSLMODE, and PGPASSWORD or PGPASSWORD_FILE. Passwords reach
# psql through its environment (\getenv, psql 15 or later), never a command
# line; the server receives them in ALTER ROLE ... PASSWORD, which it logs
# only with log_statement set to ddl or all.
#
# deploy/compose.yaml runs it as the one-shot service postgres-roles; in
# Kubernetes, deploy/kubernetes/postgres-roles.yaml and
# deploy/kubernetes/temporal/postgres-roles.yaml run it on demand (see
# docs/operations.md).
set -euo pipefail
# shellcheck source=secret-files.sh
. "$(dirname "${BASH_SOURCE[0]}")/secret-files.sh"
load_secret_files PGPASSWORD TEMPORAL_SERVER_DB_PASSWORD SITEOPS_DATABASE_URL

# psql_admin runs SQL from standard input as the administrator.
psql_admin() {
  psql --no-psqlrc --quiet --set ON_ERROR_STOP=1 "$@"
}

# own_databases DB...: creates or updates the login role ROLE_NAME with the
# password ROLE_PASSWORD (both set by the caller for this call only) and
# makes it the owner of each DB, created when missing.
own_databases() {
  local db
  psql_admin --set role="$ROLE_NAME" <<'SQL'
\getenv password ROLE_PASSWORD
SELECT format('CREATE ROLE %I LOGIN', :'role')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT PASSWORD %L', :'role', :'password') \gexec
SQL
  for db in "$@"; do
    psql_admin --set role="$ROLE_NAME" --set db="$db" <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SELECT format('ALTER DATABASE %I OWNER TO %I', :'db', :'role') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', :'db') \gexec
\connect :"db"
SELECT format('ALTER SCHEMA public OWNER TO %I', :'role') \gexec
REVOKE ALL ON SCHEMA public FROM PUBLIC;
SQL
    echo "postgres-roles: $db is owned by $ROLE_NAME, the only role but superusers that may connect to it"
  done
}

did=0
if [ -n "${TEMPORAL_SERVER_DB_PASSWORD:-}" ]; then
  ROLE_NAME="${TEMPORAL_SERVER_DB_USER:-temporal}" ROLE_PASSWORD="$TEMPORAL_SERVER_DB_PASSWORD" \
    own_databases "${TEMPORAL_SERVER_DB_NAME:-temporal}" "${TEMPORAL_SERVER_VISIBILITY_DB_NAME:-temporal_visibility}"
  did=1
fi

if [ -n "${SITEOPS_DATABASE_URL:-}" ]; then
  # postgres[ql]://USER:PASSWORD@HOST[:PORT]/DB[?...]: the password is
  # letters and digits (deploy/compose-secrets.sh makes it so), as a URL
  # carries it without escaping.
  re='^postgres(ql)?://([A-Za-z0-9_]+):([A-Za-z0-9]+)@[^/]+/([A-Za-z0-9_]+)([?].*)?$'
  if [[ ! "$SITEOPS_DATABASE_URL" =~ $re ]]; then
    echo "postgres-roles: SITEOPS_DATABASE_URL is not postgres://USER:PASSWORD@HOST:PORT/DATABASE with a user and database of letters, digits and _ and a password of letters and digits; fix it (its value is not shown)" >&2
    exit 2
  fi
  ROLE_NAME="${BASH_REMATCH[2]}" ROLE_PASSWORD="${BASH_REMATCH[3]}" own_databases "${BASH_REMATCH[4]}"
  did=1
fi

if [ "$did" = 0 ]; then
  echo "postgres-roles: nothing to do; give TEMPORAL_SERVER_DB_PASSWORD(_FILE) for Temporal's role, SITEOPS_DATABASE_URL(_FILE) for siteops', or both" >&2
  exit 2
fi
