# siteops — the two commands a newcomer needs are `make demo` and `make test`.
# Everything they need beyond Go is built from the Go module proxy into .tools/.

GO        ?= go
TOOLS     := $(CURDIR)/.tools/bin
FUZZTIME  ?= 10s
BENCHTIME ?= 1s

STATICCHECK_VERSION   := v0.8.2
GOLANGCI_LINT_VERSION := v2.15.0

# Fuzz targets as package:target pairs.
FUZZ_TARGETS := ./agentsite/webhook:FuzzParseHeader ./agentsite/webhook:FuzzVerify

.PHONY: all build test unit fuzz-short fuzz lint bench demo clean

all: build

build:
	$(GO) build -o bin/siteops ./cmd/siteops

## test: formatting and vet checks, every test with the race detector, then short fuzz runs.
test: unit fuzz-short

unit:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

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

## lint: gofmt, go vet, staticcheck and golangci-lint (errcheck, errorlint, gosec, revive).
lint: $(TOOLS)/staticcheck $(TOOLS)/golangci-lint
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/golangci-lint run ./...

## bench: the benchmarks whose numbers bench/README.md records.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## demo: what exists so far: build the binary and show a webhook signed and verified.
demo: build
	@./bin/siteops --help
	@printf '%s' '{"id":"evt_demo","type":"lead.created","created_at":"2026-11-21T09:00:00.000Z","data":{"site_id":"site_demo","lead_id":"lead_demo"}}' > bin/demo-body.json
	@echo; echo "== signing a lead.created delivery"; \
	  header=$$(SITEOPS_WEBHOOK_SECRETS=whsec_demo_secret ./bin/siteops signature sign --body bin/demo-body.json); \
	  echo "svc-signature: $$header"; \
	  echo "== verifying it"; \
	  SITEOPS_WEBHOOK_SECRETS=whsec_old_secret,whsec_demo_secret ./bin/siteops signature verify --body bin/demo-body.json --header "$$header"; \
	  echo "== verifying it after a proxy changed one byte (must fail)"; \
	  sed 's/lead_demo/lead_dem0/' bin/demo-body.json > bin/demo-body-altered.json; \
	  if SITEOPS_WEBHOOK_SECRETS=whsec_demo_secret ./bin/siteops signature verify --body bin/demo-body-altered.json --header "$$header"; then exit 1; fi

clean:
	rm -rf bin
