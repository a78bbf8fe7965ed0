# syntax=docker/dockerfile:1
# siteops-temporal: the self-hosted Temporal cluster siteops runs on, in one
# image for every Temporal container of deploy/compose.yaml and
# deploy/kubernetes/temporal:
#   temporal-service.sh frontend|history|matching|worker   one server service
#   temporal-schema.sh                                      create/upgrade both schemas (a job)
#   temporal-setup.sh                                       namespace + search attributes (a job)
#   postgres-roles.sh                                       Temporal's and siteops' database roles (a job, as the DBA)
# Build from the repository root, and deploy it by the digest the push prints:
#   docker build -f deploy/temporal.Dockerfile -t siteops-temporal:v1.32.2 .
#
# Both base images are pinned by version and digest (see deploy/Dockerfile
# for why and how to update them; deploy/images_test.go checks the form).
#
# Why not temporalio/server and temporalio/admin-tools: the binaries here
# are the ones the Makefile pins and the tests run (internal/cluster checks
# deploy/temporal against this server build; deploy_test keeps the versions
# equal), the server configuration is the one the project keeps rather than
# the images' own template and entrypoint, and temporal-setup.sh needs bash,
# which recent admin-tools images (plain Alpine) no longer carry. The cost is
# one Go build of a few minutes.

# The same golang image as deploy/Dockerfile (its comment says where the
# digest was published).
FROM golang:1.26.8-bookworm@sha256:dc9ad6c05acc7a88e5b71bde60a5fe3bd4b9f0db209011711b464107438a8107 AS build
ARG TEMPORAL_SERVER_VERSION=v1.32.2
ARG TEMPORAL_CLI_VERSION=v1.5.1
# The server needs Go 1.26.10 or newer: its build and its SQL tool's use the
# Go release the Makefile's SERVER_GOTOOLCHAIN names, which the go command
# takes from the Go module proxy (the image's own Go, like every machine's,
# runs with GOTOOLCHAIN=local).
ARG SERVER_GOTOOLCHAIN=go1.27.3
ENV CGO_ENABLED=0 GOBIN=/out
# The server is siteops' build of it (deploy/temporal-server: the server at
# TEMPORAL_SERVER_VERSION, its go.mod says, with the signal-only policy
# that keeps the ingress's certificate to signals); go install names the
# SQL tool sql.
COPY deploy/temporal-server /src/temporal-server
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd /src/temporal-server && GOTOOLCHAIN=${SERVER_GOTOOLCHAIN} go build -trimpath -ldflags "-s -w" -o /out/temporal-server . \
 && GOTOOLCHAIN=${SERVER_GOTOOLCHAIN} go install -trimpath -ldflags "-s -w" go.temporal.io/server/cmd/tools/sql@${TEMPORAL_SERVER_VERSION} \
 && go install -trimpath -ldflags "-s -w" github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION} \
 && mv /out/sql /out/temporal-sql-tool

# Debian slim rather than distroless: the scripts need bash, and the probes
# of compose use it; psql (postgresql-client, 15 in bookworm: \getenv) is
# for postgres-roles.sh. debian:12.13-slim by the digest published beside
# that exact tag in public Dockerfiles (an omnius-api-server runtime stage,
# among others) and beside debian:bookworm-slim in thirdkeyai/symbiont's
# Dockerfile ("verified against Docker Hub on 2026-05-17").
FROM debian:12.13-slim@sha256:67b30a61dc87758f0caf819646104f29ecbda97d920aaf5edc834128ac8493d3
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates postgresql-client \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 1000 --user-group --create-home temporal
COPY --from=build /out/ /usr/local/bin/
# secret-files.sh is sourced by the others (NAME_FILE: a secret read from a file).
COPY --chmod=755 deploy/temporal-service.sh deploy/temporal-schema.sh deploy/temporal-setup.sh deploy/postgres-roles.sh /usr/local/bin/
COPY --chmod=644 deploy/secret-files.sh /usr/local/bin/
# The configuration the project keeps; compose mounts the same directories
# over these, so that an edit needs no rebuild.
COPY deploy/temporal/config /etc/temporal/config
COPY deploy/temporal/dynamicconfig /etc/temporal/dynamicconfig
WORKDIR /etc/temporal
USER 1000:1000
# Frontend gRPC and HTTP API, history, matching; 6933-6939 membership.
EXPOSE 7233 7243 7234 7235 6933 6934 6935 6939
CMD ["temporal-service.sh", "--help"]
