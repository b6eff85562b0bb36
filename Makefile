# corral — see README.md. Every target works on a fresh Debian machine with Go.
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN     := bin/corral
CLIENT_BIN := bin/corral-client
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
export PATH := $(dir $(GO)):$(PATH)

# Packages with goroutines and locks run under the race detector.
RACE_PKGS := ./api/... ./ctld/... ./noded/... ./internal/authd/... ./internal/attest/...

.PHONY: all build install demo test test-race vet bench clean image deps fuzz

all: build

# bin/corral is the full binary (daemons and every command); bin/corral-client
# the same commands without the daemons' packages (-tags corral_client, no
# cgo), which the Slurm aliases point at because it starts several times
# faster (docs/performance.md, "As fast as Slurm's own commands").
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/corral
	CGO_ENABLED=0 $(GO) build -tags corral_client -ldflags "-s -w -X main.version=$(VERSION)" -o $(CLIENT_BIN) ./cmd/corral

# Both binaries into $(PREFIX)/bin, with the
# Slurm aliases beside them pointing at corral-client; FORCE=1 replaces
# aliases (or other files of those names) already there.
PREFIX ?= /usr/local
install: build
	install -d $(PREFIX)/bin
	install -m 0755 $(BIN) $(CLIENT_BIN) $(PREFIX)/bin/
	$(PREFIX)/bin/corral install-aliases $(if $(FORCE),--force) $(PREFIX)/bin

demo: build deps image
	scripts/demo.sh

# Debian packages the demo and the tests need (installed when missing).
deps:
	scripts/install-deps.sh

# The default guest image (kernel + busybox initramfs) for the vm runner.
image: deps
	scripts/build-image.sh $(IMAGE_DIR)

vet:
	$(GO) vet ./...
	$(GO) vet -tags corral_client ./cmd/corral
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: vet image
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -timeout 10m -tags corral_client ./cmd/corral
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)
	FUZZTIME=$(QUICK_FUZZTIME) scripts/fuzz.sh

# Every fuzz target for FUZZTIME each (FUZZ=REGEXP picks targets); `make
# test` runs each for QUICK_FUZZTIME.
FUZZTIME ?= 30s
QUICK_FUZZTIME ?= 3s
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...

clean:
	rm -rf bin
