# warren's two set-up commands are `make run` and `make test`.
GO      ?= go
BIN     := bin/warren
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/warrenhq/warren/internal/daemon.Version=$(VERSION)

.PHONY: build run test test-short bench vet fmt doctor clean proto

# A static binary: no cgo, nothing to install next to it.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/warren

# Start the daemon on embedded defaults (127.0.0.1:7433, /var/lib/warren). Needs root.
run: build
	./$(BIN) serve --log-format text

# Every test, with the race detector. Needs root (real namespaces, mounts and
# cgroups) and busybox-static (test images); .ci/run installs it.
test:
	$(GO) test -race -count=1 -timeout 20m ./...

test-short:
	$(GO) test -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 300x ./internal/daemon/ ./internal/sandbox/

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt needed"; exit 1)

# Regenerate the RPC API's Go code under api/gen from api/proto: buf lint,
# then buf generate with local plugins, every tool from tools/go.mod (no
# BSR). Commit the result: builds and CI never run a code generator. The
# checksums let a test tell when the generated code is stale.
PROTO_SUMS := api/gen/warren/v1/generated.sha256
proto:
	$(GO) tool -modfile=tools/go.mod buf lint
	$(GO) tool -modfile=tools/go.mod buf generate
	sha256sum api/proto/warren/v1/warren.proto buf.gen.yaml tools/go.mod \
		api/gen/warren/v1/warren.pb.go \
		api/gen/warren/v1/warrenv1connect/warren.connect.go \
		api/gen/warren/v1/warrenv1grpc/warren_grpc.pb.go > $(PROTO_SUMS)

doctor: build
	./$(BIN) doctor

clean:
	rm -rf bin

