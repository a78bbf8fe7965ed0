#!/usr/bin/env bash
# One-time setup of the Temporal namespace siteops runs in, with the search
# attributes embed incidents carry (the starter uses them only where they
# are registered). Run with the temporal CLI pointed at your cluster:
#   TEMPORAL_ADDRESS=temporal-frontend:7233 deploy/temporal-setup.sh
set -euo pipefail
ns="${TEMPORAL_NAMESPACE:-siteops}"
temporal operator namespace create --namespace "$ns" --retention 30d || echo "namespace $ns exists"
temporal operator search-attribute create --namespace "$ns" --name SiteopsSiteID --type Keyword
temporal operator search-attribute create --namespace "$ns" --name SiteopsOperator --type Keyword
