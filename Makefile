# siteops — the two commands a newcomer needs are `make demo` and `make test`.
# Everything they need beyond Go is built from the Go module proxy into .tools/.

GO        ?= go
TOOLS     := $(CURDIR)/.tools/bin
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

STATICCHECK_VERSION   := v0.8.2
GOLANGCI_LINT_VERSION := v2.15.0
WORKFLOWCHECK_VERSION := v0.6.0
# Later CLI versions carry replace directives and cannot be built with go install.
TEMPORAL_CLI_VERSION  := v1.5.1
# The Temporal server (and its SQL tool) of `make cluster` and internal/cluster.
# deploy/temporal-server/go.mod requires the same version (deploy/temporal_test.go
# holds the two together): to move, change both, run `go mod tidy` there
# (with SERVER_GO's GOTOOLCHAIN).
TEMPORAL_SERVER_VERSION := v1.32.2
# go.temporal.io/server v1.32.2 requires Go 1.26.10 or newer, newer than the
# machines' Go 1.26.8 (which runs with GOTOOLCHAIN=local and would refuse:
# "requires go >= 1.26.10 (running go 1.26.8; GOTOOLCHAIN=local)"). The server
# build (deploy/temporal-server, whose go.mod says go 1.26.10) and its SQL tool
# are built with Go 1.27.3, which the go command takes from the Go module
# proxy (about 76 MB, once per machine). siteops' own module stays on the
# machine's Go.
SERVER_GOTOOLCHAIN := go1.27.3
SERVER_GO := GOTOOLCHAIN=$(SERVER_GOTOOLCHAIN) $(GO)
# The linters of the server build's module (make lint), built with that Go.
SERVER_TOOLS := $(TOOLS)/$(SERVER_GOTOOLCHAIN)

# Fuzz targets as package:target:short-run pairs. make test's short runs are
# counted in executions (about 10 s each here), not timed: with a timed
# -fuzztime, Go 1.26's fuzz coordinator can report the deadline itself as a
# failure ("context deadline exceeded", no crasher; go.dev/issue/75804,
# fixed in Go 1.27), which failed a CI run here.
FUZZ_TARGETS := ./agentsite/webhook:FuzzParseHeader:500000x ./agentsite/webhook:FuzzVerify:200000x ./ingress:FuzzHandler:15000x

.PHONY: all build tools test unit fuzz-short fuzz lint bench soak demo clean histories

all: build

# The version the build is, linked in as the build id a versioned worker
# polls as: one per commit (a modified tree's "-dirty" is followed by the
# executable's digest at run time), never a shared placeholder like "dev".
SITEOPS_VERSION ?= $(shell git describe --always --dirty 2>/dev/null)

build:
	$(GO) build -ldflags "-X github.com/siteops/siteops/release.stamp=$(SITEOPS_VERSION) -X main.version=$(SITEOPS_VERSION)" -o bin/siteops ./cmd/siteops

## tools: the pinned temporal CLI (the tests start its dev server) and the pinned
## Temporal server and SQL tool (the production-shape tests start a cluster).
tools: $(TOOLS)/temporal $(TOOLS)/temporal-server $(TOOLS)/temporal-sql-tool

$(TOOLS)/temporal:
	@echo "building the temporal CLI $(TEMPORAL_CLI_VERSION) from the Go module proxy (a few minutes, once)"
	GOBIN=$(TOOLS) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

## test: formatting and vet checks, every test with the race detector (end to end on a
## real Temporal dev server and, when PostgreSQL is reachable, on a Temporal cluster
## on PostgreSQL with several workers and ingress replicas; SQLite and PostgreSQL
## stores), then short fuzz runs.
test: unit fuzz-short

# SITEOPS_REQUIRE_PREVIOUS_RELEASE: the tests that run the previous release
# beside this one (built from git) fail, naming the fix, rather than skip
# when it cannot be built.
# -parallel 6: the end-to-end tests that mostly wait run six at a time
# (e2e/main_test.go says which and why), whatever the machine's core count.
# -timeout 40m: e2e takes 6 to 13 minutes; on a machine twice as slow a
# failing test should say why, not be cut short by the package's timeout.
UNIT_TEST = SITEOPS_REQUIRE_TEMPORAL=1 SITEOPS_REQUIRE_PREVIOUS_RELEASE=1 $(GO) test -race -count=1 -parallel 6 -timeout 40m ./...

# go test shows nothing of a package that passes, skipped tests included, so
# unit says before and after the run (localcluster check) whether the tests
# that need PostgreSQL, the Temporal cluster scenario among them, ran.
unit: tools
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@# The server build's policy tests, without -race: they share no state
	@# between goroutines, and a race build of the whole server would cost
	@# minutes that the binary's build (make tools) has already spent.
	cd deploy/temporal-server && $(SERVER_GO) vet . && $(SERVER_GO) test -count=1 .
	@check=$$($(CLUSTER_RUN) check); echo "$$check"; \
	  echo "$(UNIT_TEST)"; $(UNIT_TEST); rc=$$?; \
	  case "$$check" in SKIPPING*) echo "$$check";; esac; \
	  $(PROMETHEUS_CHECK); $(TOOLS_CHECK); exit $$rc

# deploy/'s checks of the rendered manifests need kubectl (its kustomize) and
# the rollout script's lint shellcheck; without them those checks skip
# (SITEOPS_REQUIRE_KUBECTL and SITEOPS_REQUIRE_SHELLCHECK make them fail, as
# .ci/run does where it can), which go test does not show, so unit says so.
TOOLS_CHECK = command -v kubectl >/dev/null 2>&1 || \
	echo "SKIPPING kustomize's reading of the rendered Kubernetes manifests (deploy/rollout_test.go, deploy/monitoring_test.go): kubectl is not installed"; \
	command -v shellcheck >/dev/null 2>&1 || \
	echo "SKIPPING shellcheck of deploy/rollout.sh: Debian's shellcheck package is not installed (apt-get install shellcheck; .ci/run installs it)"

# The rules' promtool tests (deploy/alerts_test.go) and the Prometheus
# scenario (e2e/prometheus_test.go) need Debian's prometheus package; without
# it they skip, which go test does not show, so unit says so in one line.
PROMETHEUS_CHECK = { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || \
	echo "SKIPPING the Prometheus rules' promtool tests and the Prometheus scenario: Debian's prometheus package is not installed (apt-get install prometheus; .ci/run installs it)"

fuzz-short:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; execs=$${rest##*:}; \
	  echo "fuzz $$name ($$pkg) for $$execs executions"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$execs $$pkg; \
	done

## fuzz: run every fuzz target for FUZZTIME (default 10s; e.g. make fuzz FUZZTIME=5m, or a
## count such as FUZZTIME=2000000x, which Go 1.26's deadline race cannot fail).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; \
	  echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(TOOLS)/workflowcheck:
	GOBIN=$(TOOLS) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

## lint: gofmt, go vet, staticcheck, golangci-lint (errcheck, errorlint, gosec, revive) and workflowcheck.
lint: $(TOOLS)/staticcheck $(TOOLS)/golangci-lint $(TOOLS)/workflowcheck $(SERVER_TOOLS)/staticcheck $(SERVER_TOOLS)/golangci-lint
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/golangci-lint run ./...
	$(TOOLS)/workflowcheck ./workflows/...
	# The server build is a module of its own, which ./... leaves out; its
	# linters are built with its Go (a linter built with Go 1.26 cannot
	# read Go 1.27's standard library: "file requires newer Go version").
	cd deploy/temporal-server && $(SERVER_GO) vet ./... && GOTOOLCHAIN=$(SERVER_GOTOOLCHAIN) $(SERVER_TOOLS)/staticcheck ./... && GOTOOLCHAIN=$(SERVER_GOTOOLCHAIN) $(SERVER_TOOLS)/golangci-lint run ./...

$(SERVER_TOOLS)/staticcheck:
	GOBIN=$(SERVER_TOOLS) $(SERVER_GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(SERVER_TOOLS)/golangci-lint:
	GOBIN=$(SERVER_TOOLS) $(SERVER_GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

## histories: record this release's workflow histories for the replay check, after a
## deliberate workflow change (RELEASE names the folder; the older folders stay and must replay).
histories: $(TOOLS)/temporal
	@test -n "$(RELEASE)" || (echo "make histories RELEASE=<release name, e.g. release-3>"; exit 2)
	SITEOPS_RECORD_HISTORIES=$(RELEASE) $(GO) test -count=1 -timeout 30m -run 'TestOnboardingReachesPublished|TestOnboardingSurvivesFaults|TestTenThousandLeadSync|TestEmbedOffThenRestore|TestRotationUnderContinuousDeliveries|TestWebhookCreateKeepsItsKeyAcrossRetries|TestBurstKeepsLeadSyncHistoriesSmall|TestLeadSyncCutShortCarriesItsProgress|TestDeletedEndpointSecretRefusedWithinOneReconcilePeriod|TestOnboardingStartedAgainWithSDKDefaults|TestLeadSweepFindsALeadWhoseDeliveryNeverCame|TestLeadShardsSyncTheEventsOfManySites' ./e2e/

## bench: the benchmarks whose numbers bench/README.md records: the packages' own
## benchmarks for BENCHTIME each; bench/'s counted benchmarks (deliveries, events,
## calls) BENCH_COUNTED times each; bench/'s scenarios once each.
BENCH_COUNTED  ?= 5000x
# A -bench pattern applies its part after a slash to every matched benchmark's
# sub-benchmarks, so the two halves of ForgedRequestStoreCalls run on their own.
bench: tools
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $$($(GO) list ./... | grep -v '/bench$$')
	$(GO) test -p 1 -run '^$$' -bench 'Ingress|Relay|EndToEnd' -benchmem -benchtime $(BENCH_COUNTED) -timeout 60m ./bench/
	$(GO) test -p 1 -run '^$$' -bench 'ForgedRequestStoreCalls/(known|one|unknown)' -benchtime $(BENCH_COUNTED) ./bench/
	$(GO) test -p 1 -run '^$$' -bench 'LeadSync|Onboarding|Incident|EmbedOffUnderSaturation|WorkerMemory|ThrottledAPI|CapacityCosts' -benchtime 1x -timeout 90m ./bench/
	$(GO) test -p 1 -run '^$$' -bench 'ForgedRequestStoreCalls/held' -benchtime 1x ./bench/
	$(GO) test -p 1 -run '^$$' -bench 'VerifyAgainstStripe' -benchmem -benchtime $(BENCHTIME) ./bench/

## soak: the long scenarios at full size (SITEOPS_SOAK=1), without the race detector: the
## fresh-junk flood (valid deliveries within 1 s), the scale-out run on the
## cluster (100 onboardings, 20,000 lead events, workers and replicas killed), the
## 20,000-event burst, lead syncs under 30 % and 50 % 429 with 200-lead pages.
soak: tools
	@$(CLUSTER_RUN) check
	SITEOPS_SOAK=1 SITEOPS_REQUIRE_TEMPORAL=1 $(GO) test -count=1 -timeout 80m -v \
	  -run 'TestScaleOut|TestBurstKeepsLeadSyncHistoriesSmall|TestLeadSyncSurvivesThrottling|TestWaitedForEventsPassBulkOnes|TestIngressFreshJunkHoldsNoSlot' ./e2e/ ./e2e/production/

## demo: build the pinned temporal CLI and siteops, then run everything on this machine and show it
## working (DEMO_FLAGS=--keep leaves it running; Ctrl-C stops it all).
demo: $(TOOLS)/temporal build
	SITEOPS_TEMPORAL_CLI=$(TOOLS)/temporal ./bin/siteops demo $(DEMO_FLAGS)

clean:
	rm -rf bin

.PHONY: cluster-tools cluster cluster-down cluster-check

## cluster-tools: the pinned Temporal server and its SQL tool, for `make cluster` and the cluster tests.
cluster-tools: $(TOOLS)/temporal-server $(TOOLS)/temporal-sql-tool

# The server is siteops' build of it (deploy/temporal-server, a module of its
# own that requires go.temporal.io/server at TEMPORAL_SERVER_VERSION): the
# upstream server with siteops' role policy (default deny, each client
# certificate its role's calls). It is rebuilt when its sources change.
TEMPORAL_SERVER_SRC := $(wildcard deploy/temporal-server/*.go) deploy/temporal-server/go.mod deploy/temporal-server/go.sum
$(TOOLS)/temporal-server: $(TEMPORAL_SERVER_SRC)
	@echo "building the Temporal server $(TEMPORAL_SERVER_VERSION) with siteops' role policy (deploy/temporal-server; a few minutes, once)"
	@mkdir -p $(TOOLS) && cd deploy/temporal-server && $(SERVER_GO) build -trimpath -o $@ .

# go install names the binary sql: install into a scratch GOBIN, then rename.
# It carries the schemas the server of its version expects, so it is rebuilt
# when TEMPORAL_SERVER_VERSION moves (the stamp names the version).
SQL_TOOL_STAMP := $(TOOLS)/.temporal-sql-tool-$(TEMPORAL_SERVER_VERSION)
$(TOOLS)/temporal-sql-tool: $(SQL_TOOL_STAMP)
$(SQL_TOOL_STAMP):
	@echo "building temporal-sql-tool $(TEMPORAL_SERVER_VERSION) from the Go module proxy"
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  GOBIN=$$tmp $(SERVER_GO) install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION) && \
	  mkdir -p $(TOOLS) && mv "$$tmp/sql" $(TOOLS)/temporal-sql-tool && \
	  rm -f $(TOOLS)/.temporal-sql-tool-* && touch $@

CLUSTER_RUN = SITEOPS_TEMPORAL_SERVER=$(TOOLS)/temporal-server SITEOPS_TEMPORAL_SQL_TOOL=$(TOOLS)/temporal-sql-tool \
	SITEOPS_TEMPORAL_CLI=$(TOOLS)/temporal $(GO) run ./internal/cluster/cmd/localcluster

## cluster: a real Temporal cluster (frontend, history, matching and worker processes) on the
## PostgreSQL at 127.0.0.1:5432 (or SITEOPS_TEST_POSTGRES_URL), left running in the background
## with state and logs in .cluster/; prints the addresses and the variables to export.
cluster: cluster-tools $(TOOLS)/temporal
	@$(CLUSTER_RUN) up --dir .cluster

## cluster-check: say whether PostgreSQL is reachable, i.e. whether `make test` runs the
## tests that need it (the cluster scenario among them) or skips them.
cluster-check:
	@$(CLUSTER_RUN) check

## cluster-down: stop the cluster of `make cluster` and drop its databases (with the password
## of SITEOPS_TEST_POSTGRES_URL when it names the cluster's server; the state file has none).
cluster-down:
	@$(CLUSTER_RUN) down --dir .cluster
