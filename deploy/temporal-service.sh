#!/usr/bin/env bash
# Runs one service of siteops' Temporal cluster in a container of the image
# deploy/temporal.Dockerfile builds: the pinned temporal-server with the
# configuration the project keeps (deploy/temporal/config/cluster.yaml, which
# the image holds in /etc/temporal), as internal/cluster runs it on one
# machine. deploy/compose.yaml and deploy/kubernetes/temporal run it.
#
#   temporal-service.sh frontend|history|matching|worker
#
# Every address, port, database and credential comes from the
# TEMPORAL_SERVER_* variables cluster.yaml reads; the database password may
# instead be a file, TEMPORAL_SERVER_DB_PASSWORD_FILE (a mounted secret),
# which this script reads into TEMPORAL_SERVER_DB_PASSWORD (secret-files.sh).
# In a container the service
# listens on every interface (TEMPORAL_SERVER_BIND_IP defaults to 0.0.0.0
# here) and tells the other services its own IP, which must be an address,
# not a name: TEMPORAL_SERVER_BROADCAST_ADDRESS, which Kubernetes sets from
# status.podIP and which defaults here to the address the container's
# hostname resolves to (compose). TEMPORAL_ROOT (the server's own variable,
# default /etc/temporal here) is the directory holding config/.
set -euo pipefail
# shellcheck source=secret-files.sh
. "$(dirname "${BASH_SOURCE[0]}")/secret-files.sh"

case "${1:-}" in
  frontend | history | matching | worker) service=$1 ;;
  *)
    echo "usage: temporal-service.sh frontend|history|matching|worker" >&2
    exit 2
    ;;
esac

export TEMPORAL_SERVER_BIND_IP="${TEMPORAL_SERVER_BIND_IP:-0.0.0.0}"
if [ -z "${TEMPORAL_SERVER_BROADCAST_ADDRESS:-}" ]; then
  host="${HOSTNAME:-$(cat /etc/hostname)}"
  TEMPORAL_SERVER_BROADCAST_ADDRESS=$(getent ahostsv4 "$host" | awk 'NR == 1 { print $1 }')
  if [ -z "$TEMPORAL_SERVER_BROADCAST_ADDRESS" ]; then
    echo "temporal-service: $host does not resolve to an IPv4 address; set TEMPORAL_SERVER_BROADCAST_ADDRESS to this container's IP" >&2
    exit 1
  fi
  export TEMPORAL_SERVER_BROADCAST_ADDRESS
fi

load_secret_files TEMPORAL_SERVER_DB_PASSWORD

# No authorizer is configured (--allow-no-auth): a client the frontend lets
# in may call any API in any namespace. What keeps others out is the
# network (the NetworkPolicies of deploy/kubernetes/temporal admit only the
# siteops pods that need the frontend; compose publishes it on loopback
# only) and, in Kubernetes, mutual TLS (TEMPORAL_SERVER_TLS_CLIENT_CA: only
# a client certificate that CA signed gets in). See docs/operations.md.
exec temporal-server --root "${TEMPORAL_ROOT:-/etc/temporal}" --config config --env cluster --allow-no-auth \
  start --service "$service"
