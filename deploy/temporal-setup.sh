#!/usr/bin/env bash
# Registers the Temporal namespaces siteops runs in, each with the search
# attributes embed incidents carry (the starter sets them only where they are
# registered). This is the one script that does so: internal/cluster (the
# tests), `make cluster` and the deploy/ jobs all run it. It is idempotent: a
# namespace or search attribute that exists is left as it is.
#
#   deploy/temporal-setup.sh                  # the namespace $TEMPORAL_NAMESPACE (default siteops)
#   deploy/temporal-setup.sh default siteops  # exactly the namespaces named
#
# The temporal CLI reads the connection from its own environment, as siteops
# does: TEMPORAL_ADDRESS (default localhost:7233), TEMPORAL_API_KEY (or
# TEMPORAL_API_KEY_FILE, a file holding it, which this script reads),
# TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,
# TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_PROFILE.
# Knobs of this script:
#   SITEOPS_TEMPORAL_CLI         the temporal binary (default: temporal on PATH)
#   SITEOPS_NAMESPACE_RETENTION  retention of namespaces it creates (default 30d)
#   SITEOPS_SETUP_WAIT           seconds to wait for the frontend to answer (default 60)
set -euo pipefail
# shellcheck source=secret-files.sh
. "$(dirname "${BASH_SOURCE[0]}")/secret-files.sh"
load_secret_files TEMPORAL_API_KEY

temporal="${SITEOPS_TEMPORAL_CLI:-temporal}"
retention="${SITEOPS_NAMESPACE_RETENTION:-30d}"
wait_seconds="${SITEOPS_SETUP_WAIT:-60}"
if [ "$#" -eq 0 ]; then
  set -- "${TEMPORAL_NAMESPACE:-siteops}"
fi

# retry CMD...: runs CMD until it succeeds, for up to $wait_seconds. A job
# may start together with the cluster, and a namespace just created takes a
# few seconds to reach the caches of every frontend.
retry() {
  local deadline=$((SECONDS + wait_seconds)) out
  until out=$("$@" 2>&1); do
    if [ "$SECONDS" -ge "$deadline" ]; then
      printf '%s\n' "$out" >&2
      echo "temporal-setup: gave up after ${wait_seconds}s on: temporal ${*:2} (is TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS:-localhost:7233} right, and the TLS variables?)" >&2
      return 1
    fi
    sleep 1
  done
  if [ -n "$out" ]; then printf '%s\n' "$out"; fi
}

retry "$temporal" operator cluster health >/dev/null

for ns in "$@"; do
  if "$temporal" operator namespace describe --namespace "$ns" >/dev/null 2>&1; then
    echo "namespace $ns exists"
  elif ! "$temporal" operator namespace create --namespace "$ns" --retention "$retention"; then
    # Another run may have created it in the meantime.
    retry "$temporal" operator namespace describe --namespace "$ns" >/dev/null
    echo "namespace $ns exists"
  fi
  # Adding an attribute that exists with the same type succeeds.
  retry "$temporal" operator search-attribute create --namespace "$ns" --name SiteopsSiteID --type Keyword
  retry "$temporal" operator search-attribute create --namespace "$ns" --name SiteopsOperator --type Keyword
  retry "$temporal" operator search-attribute create --namespace "$ns" --name SiteopsCaller --type Keyword
done
