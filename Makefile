# skiprange — build, test and tooling entry points. `make help` lists them.
GO        ?= go
BIN       := bin
PROTOC    ?= protoc
PROTOC_GEN_GO_VERSION := $(shell $(GO) list -m -f '{{.Version}}' google.golang.org/protobuf)

.PHONY: help build test test-props test-short lint proto sim-demo bench clean

help: ## list targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every command into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

test: lint ## vet, format check, and every test (the CI command)
	$(GO) test -count=1 -timeout 20m ./...

test-props: ## explore 3,000 random schedules each of the overlay and balancing property tests (minutes)
	SKIPRANGE_RANDOM_PROPS=1 $(GO) test -count=1 -timeout 90m ./testnet/sim/ -run 'TestOverlayProperties|TestBalanceProperties' -rapid.checks=3000 -v

test-short: ## quick tests only
	$(GO) test -count=1 -short ./...

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

proto: ## regenerate overlay/pb from its .proto files (needs protoc: apt-get install protobuf-compiler)
	@command -v $(PROTOC) >/dev/null || { echo "protoc not found: apt-get install -y protobuf-compiler"; exit 1; }
	GOBIN=$(CURDIR)/$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	PATH=$(CURDIR)/$(BIN):$$PATH $(PROTOC) --go_out=. --go_opt=paths=source_relative overlay/pb/overlay.proto overlay/pb/client.proto

sim-demo: build ## the main job for now: a 1,000-node overlay built by joins, loaded, queried, crashed and repaired
	$(BIN)/skipsim overlay --nodes 1000 --keys 100000 --lookups 10000 --scans 1000 --crash 0.1 --seed 1

bench: ## Go benchmarks (see docs/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean: ## remove built binaries
	rm -rf $(BIN)
