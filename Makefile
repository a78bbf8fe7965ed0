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

# Fuzz targets as package:target pairs.
FUZZ_TARGETS := ./agentsite/webhook:FuzzParseHeader ./agentsite/webhook:FuzzVerify ./webhookingress:FuzzHandler

.PHONY: all build tools test unit fuzz-short fuzz lint bench demo clean histories

all: build

build:
	$(GO) build -o bin/siteops ./cmd/siteops

## tools: the pinned temporal CLI (the tests start its dev server).
tools: $(TOOLS)/temporal

$(TOOLS)/temporal:
	@echo "building the temporal CLI $(TEMPORAL_CLI_VERSION) from the Go module proxy (a few minutes, once)"
	GOBIN=$(TOOLS) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

## test: formatting and vet checks, every test with the race detector (end to end on a
## real Temporal dev server, SQLite and PostgreSQL), then short fuzz runs.
test: unit fuzz-short

unit: $(TOOLS)/temporal
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	SITEOPS_REQUIRE_TEMPORAL=1 $(GO) test -race -count=1 -timeout 20m ./...

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME)

## fuzz: run every fuzz target for FUZZTIME (default 10s; e.g. make fuzz FUZZTIME=5m).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
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
lint: $(TOOLS)/staticcheck $(TOOLS)/golangci-lint $(TOOLS)/workflowcheck
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/golangci-lint run ./...
	$(TOOLS)/workflowcheck ./workflows/...

## histories: re-record the workflow histories the replay tests use.
histories: $(TOOLS)/temporal
	SITEOPS_RECORD_HISTORIES=1 $(GO) test -count=1 -run 'TestOnboardingReachesPublished|TestOnboardingSurvivesFaults|TestTenThousandLeadSync|TestEmbedOffThenRestore|TestRotationUnderContinuousDeliveries' ./e2e/

## bench: the benchmarks whose numbers bench/README.md records.
bench: $(TOOLS)/temporal
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## demo: build the pinned temporal CLI and siteops, then run everything on this machine and show it
## working (DEMO_FLAGS=--keep leaves it running; Ctrl-C stops it all).
demo: $(TOOLS)/temporal build
	SITEOPS_TEMPORAL_CLI=$(TOOLS)/temporal ./bin/siteops demo $(DEMO_FLAGS)

clean:
	rm -rf bin
