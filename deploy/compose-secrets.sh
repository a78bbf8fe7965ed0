#!/usr/bin/env bash
# Makes the secret files deploy/compose.yaml mounts (compose secrets, read by
# the processes through their *_FILE variables), in deploy/secrets/ (git
# ignores it) or the directory given:
#
#   deploy/compose-secrets.sh [DIR]
#
# It generates what can be generated — the PostgreSQL administrator's
# password, Temporal's and siteops' database passwords (siteops' inside the
# URL siteops reads), SITEOPS_SECRET_KEY — and creates the others empty:
# agentsite-api-key (write your Agent-Site API key into it), and the optional
# siteops-payload-key, siteops-webhook-secrets and temporal-api-key (empty:
# not used). It never overwrites a file that exists, so running it again
# only adds what is missing.
#
# Permissions: compose without swarm bind-mounts each file as it is on the
# host, and the containers read them as their own users (65532 siteops,
# 1000 Temporal, 999 postgres), so the files are readable by all (0444)
# inside a directory only its owner may enter (0700): other users of the
# host cannot reach them, the containers can.
set -euo pipefail

dir="${1:-$(dirname "${BASH_SOURCE[0]}")/secrets}"
mkdir -p "$dir"
chmod 700 "$dir"

# hex16 prints 16 random bytes in hex: a password that a URL carries as it is.
hex16() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }
# base64_32 prints 32 random bytes in base64 (SITEOPS_SECRET_KEY's form).
base64_32() { head -c 32 /dev/urandom | base64 | tr -d '\n'; }

# put NAME CONTENT: writes CONTENT to DIR/NAME unless the file exists.
put() {
  local path="$dir/$1"
  if [ -e "$path" ]; then
    echo "kept    $path"
    return
  fi
  (umask 077 && printf '%s' "$2" >"$path")
  chmod 444 "$path"
  echo "created $path${2:+ (generated)}"
}

put postgres-password "$(hex16)"
put temporal-db-password "$(hex16)"
put siteops-database-url "postgres://siteops:$(hex16)@postgres:5432/siteops?sslmode=disable"
put siteops-secret-key "$(base64_32)"
put agentsite-api-key ""
put siteops-payload-key ""
put siteops-webhook-secrets ""
put temporal-api-key ""

if [ ! -s "$dir/agentsite-api-key" ]; then
  echo "next: write your Agent-Site API key into $dir/agentsite-api-key (chmod u+w first; keep it 0444 after)"
fi
