# syntax=docker/dockerfile:1
# siteops-temporal: the self-hosted Temporal cluster siteops runs on, in one
# image for every Temporal container of deploy/compose.yaml and
# deploy/kubernetes/temporal:
#   temporal-service.sh frontend|history|matching|worker   one server service
#   temporal-schema.sh                                      create/upgrade both schemas (a job)
#   temporal-setup.sh                                       namespace + search attributes (a job)
# Build from the repository root:
#   docker build -f deploy/temporal.Dockerfile -t siteops-temporal:v1.29.1 .
#
# Why not temporalio/server and temporalio/admin-tools: the binaries here
# are the ones the Makefile pins and the tests run (internal/cluster checks
# deploy/temporal against this server build; deploy_test keeps the versions
# equal), the server configuration is the one the project keeps rather than
# the images' own template and entrypoint, and temporal-setup.sh needs bash,
# which recent admin-tools images (plain Alpine) no longer carry. The cost is
# one Go build of a few minutes.

FROM golang:1.26-bookworm AS build
ARG TEMPORAL_SERVER_VERSION=v1.29.1
ARG TEMPORAL_CLI_VERSION=v1.5.1
ENV CGO_ENABLED=0 GOBIN=/out
# go install names the binaries server and sql.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go install -trimpath -ldflags "-s -w" go.temporal.io/server/cmd/server@${TEMPORAL_SERVER_VERSION} \
 && go install -trimpath -ldflags "-s -w" go.temporal.io/server/cmd/tools/sql@${TEMPORAL_SERVER_VERSION} \
 && go install -trimpath -ldflags "-s -w" github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION} \
 && mv /out/server /out/temporal-server \
 && mv /out/sql /out/temporal-sql-tool

# Debian slim rather than distroless: the scripts need bash, and the probes
# of compose use it.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 1000 --user-group --create-home temporal
COPY --from=build /out/ /usr/local/bin/
COPY --chmod=755 deploy/temporal-service.sh deploy/temporal-schema.sh deploy/temporal-setup.sh /usr/local/bin/
# The configuration the project keeps; compose mounts the same directories
# over these, so that an edit needs no rebuild.
COPY deploy/temporal/config /etc/temporal/config
COPY deploy/temporal/dynamicconfig /etc/temporal/dynamicconfig
WORKDIR /etc/temporal
USER 1000:1000
# Frontend gRPC and HTTP API, history, matching; 6933-6939 membership.
EXPOSE 7233 7243 7234 7235 6933 6934 6935 6939
CMD ["temporal-service.sh", "--help"]
