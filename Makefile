# warren's two set-up commands are `make run` and `make test`.
GO      ?= go
BIN     := bin/warren
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/warrenhq/warren/internal/daemon.Version=$(VERSION)

.PHONY: web build agent run test test-short bench vet lint fmt doctor vm-test clean proto e2b-proto

# A static binary: no cgo, nothing to install next to it.
build: agent
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/warren

# The small program every sandbox runs as its init and agent, embedded in
# warren (internal/agentbin). Always static, and reproducible (no VCS stamp),
# so a test can tell a stale copy. AGENT_ARCH cross-builds it for release.
AGENT     := internal/agentbin/bin/warren-agent
AGENT_ARCH ?= $(shell $(GO) env GOARCH)
agent:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(AGENT_ARCH) $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' -o $(AGENT) ./cmd/warren-agent

# The web console's vendored libraries (internal/web/static/vendor), from
# web/package-lock.json: committed, so go build never needs Node; a test
# (internal/web TestVendored) fails when they differ from the lockfile.
WEB_VENDOR := internal/web/static/vendor
WEB_FILES  := @xterm/xterm:lib/xterm.mjs @xterm/xterm:css/xterm.css @xterm/addon-fit:lib/addon-fit.mjs
web:
	cd web && npm ci --no-audit --no-fund --loglevel=error
	rm -f $(WEB_VENDOR)/*
	@for e in $(WEB_FILES); do \
		pkg=$${e%%:*}; path=$${e#*:}; f=$$(basename $$path); \
		cp web/node_modules/$$pkg/$$path $(WEB_VENDOR)/$$f; \
		v=$$(node -p "require('./web/node_modules/$$pkg/package.json').version"); \
		echo "$$f $$pkg@$$v $$path $$(sha256sum $(WEB_VENDOR)/$$f | cut -d' ' -f1)"; \
	done > $(WEB_VENDOR)/SOURCES
	cat $(WEB_VENDOR)/SOURCES

# Start the daemon on embedded defaults (127.0.0.1:7433, /var/lib/warren). Needs root.
run: build
	./$(BIN) serve --log-format text

# Every test, with the race detector. Needs root (real namespaces, mounts and
# cgroups) and busybox-static (test images); .ci/run installs it. With npm,
# test/mcp-node's packages are installed first, exactly as its lockfile pins
# them (once per lockfile); without it the Node MCP client test is skipped.
# test/summary prints what go test prints, then every skipped test with its
# reason, so that a skip never reads as a pass.
# The tests that drive the daemon with third-party clients from npm: the
# official MCP TypeScript SDK and the MCP Inspector CLI (test/mcp-node), a
# client generated from the served OpenAPI document (test/openapi-ts), the
# web console in Debian's chromium driven by playwright-core (test/console),
# warren's own TypeScript SDK with the agent frameworks it plugs into
# (sdk/typescript), and the Vercel AI SDK with E2B's SDK (test/e2b; E2B's
# own tests come from the conformance kit, which installs its own). Their
# packages are installed exactly as each lockfile pins them.
NPM_TESTS := test/mcp-node test/openapi-ts test/console sdk/typescript test/e2b

test: agent
	@for d in $(NPM_TESTS); do \
		if ! command -v npm >/dev/null; then \
			echo "make test: no npm, so $$d (a real third-party client from npm) will be skipped"; \
		elif ! cmp -s $$d/package-lock.json $$d/node_modules/.ci-lock; then \
			(cd $$d && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.ci-lock) || exit 1; \
		fi; \
	done
	GO=$(GO) $(GO) run ./test/summary -race -count=1 -timeout 20m ./...

test-short: agent
	$(GO) test -count=1 ./...

bench: agent
	$(GO) test -run '^$$' -bench . -benchtime 300x ./internal/daemon/ ./internal/sandbox/

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo "gofmt needed"; exit 1)

# staticcheck (tools/go.mod), tests included. A finding that is intended is
# silenced where it is, with the reason: a //lint:ignore comment on the
# line, or a staticcheck.conf in the package's directory.
#
# errcheck (also tools/go.mod) on the product code: every dropped error is
# either handled, or assigned to _ with a comment saying why, or its function
# is in tools/errcheck-excludes.txt in a group whose comment says why (closes
# of handles, replies to a peer that left, cleanup on a path that already
# failed). Tests are left out: a test's dropped error shows as a failed
# assertion after it, and its cleanup errors have no one to tell.
lint:
	$(GO) tool -modfile=tools/go.mod staticcheck ./...
	$(GO) tool -modfile=tools/go.mod errcheck -ignoretests -ignoregenerated -exclude tools/errcheck-excludes.txt ./...

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

# The same for the E2B envd schemas (internal/e2b/envd/proto: E2B's wire
# names, so buf's lint rules do not apply), with their own buf.gen.yaml.
E2B_PROTO := internal/e2b/envd
e2b-proto:
	cd $(E2B_PROTO) && $(GO) tool -modfile=../../../tools/go.mod buf generate
	sha256sum $(E2B_PROTO)/proto/process/process.proto $(E2B_PROTO)/proto/filesystem/filesystem.proto \
		$(E2B_PROTO)/buf.yaml $(E2B_PROTO)/buf.gen.yaml tools/go.mod \
		$(E2B_PROTO)/gen/process/process.pb.go $(E2B_PROTO)/gen/process/processconnect/process.connect.go \
		$(E2B_PROTO)/gen/filesystem/filesystem.pb.go $(E2B_PROTO)/gen/filesystem/filesystemconnect/filesystem.connect.go \
		> $(E2B_PROTO)/gen/generated.sha256

doctor: build
	./$(BIN) doctor

# Boot Debian 12's own kernel under qemu (software emulation) on pure cgroup
# v2 and run a real daemon through test/vm/check.sh's checks, plus the Go
# tests of VM_TESTS (PKG:REGEXP for some tests only). Needs root, apt's package lists and qemu-system-x86,
# cpio, busybox-static, e2fsprogs, attr; see docs/VM.md.
VM_TESTS ?= internal/quota internal/cgroup internal/doctor internal/sandbox
vm-test: build
	WARREN_BIN=$(CURDIR)/$(BIN) WARREN_VM_TESTS="$(VM_TESTS)" test/vm/run.sh

clean:
	rm -rf bin $(AGENT)

# Install the binary, the systemd unit and, unless one is there already, the
# example config: `sudo make install`, then `systemctl daemon-reload &&
# systemctl enable --now warren`. DESTDIR stages into a package root; PREFIX
# moves the binary (the unit is rewritten to match).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR    ?= $(SYSCONFDIR)/systemd/system
DIST       ?= dist

.PHONY: install release

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/warren
	install -d -m 0755 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/warren
	sed -e 's|/usr/local/bin/warren|$(BINDIR)/warren|' -e 's|/etc/warren/warren.toml|$(SYSCONFDIR)/warren/warren.toml|' \
		packaging/warren.service > $(DESTDIR)$(UNITDIR)/warren.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/warren.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/warren/warren.toml ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/warren/warren.toml; the example is packaging/warren.toml"; \
	else \
		install -m 0644 packaging/warren.toml $(DESTDIR)$(SYSCONFDIR)/warren/warren.toml; \
	fi

# Static release binaries for linux/amd64 and linux/arm64 in dist/, with
# their SHA-256 sums in dist/SHA256SUMS. -buildvcs=auto stamps the commit
# (warren version, /healthz) even where GOFLAGS turns it off.
release:
	rm -rf $(DIST)
	mkdir -p $(DIST)
	for arch in amd64 arm64; do \
		$(MAKE) --no-print-directory agent AGENT_ARCH=$$arch || exit 1; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -buildvcs=auto -ldflags '$(LDFLAGS)' \
			-o $(DIST)/warren-linux-$$arch ./cmd/warren || exit 1; \
	done
	cd $(DIST) && sha256sum warren-linux-amd64 warren-linux-arm64 > SHA256SUMS
	$(MAKE) --no-print-directory agent
