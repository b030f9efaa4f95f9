# cri-dockerd with image pinning. `make help` lists the targets.
SHELL := /usr/bin/env bash
export GOFLAGS := -modcacherw
export GOTOOLCHAIN := local
export PATH := /usr/local/go/bin:$(PATH)

BIN       := _output/cri-dockerd
# The version is upstream's release (internal/app/version.go) + semver build metadata:
# dockpin.<commit count>.g<short commit>[.dirty], so that dpkg and rpm order our builds (docs/compatibility.md, "Versions").
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_META ?= $(shell n=$$(git rev-list --count HEAD 2>/dev/null) && \
                echo "dockpin.$$n.g$$(git rev-parse --short=7 HEAD)$$(git diff --quiet HEAD -- 2>/dev/null || echo .dirty)" || \
                echo dockpin.dev)
LDFLAGS   := -X github.com/dockpin/cri-dockerd/internal/app.build=$(BUILD_META) \
             -X github.com/dockpin/cri-dockerd/internal/app.gitCommit=$(COMMIT)
# Image stores the e2e suite runs against (both by default).
E2E_STORES ?= classic containerd
# How long `make fuzz` runs each fuzz target.
FUZZTIME ?= 60s

.DEFAULT_GOAL := help

.PHONY: help
help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build the cri-dockerd binary into _output/
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cri-dockerd

.PHONY: package
package: ## .deb and .rpm (nfpm) and upstream's .tgz layout of a static binary, into _output/packages/
	LDFLAGS='$(LDFLAGS)' hack/package.sh

.PHONY: package-check
package-check: package ## inspect the packages, then every install path (install, upgrade, reinstall, remove/purge then install, masks, back to upstream with apt and dnf) in scratch roots
	hack/package-check.sh

.PHONY: test
test: unit e2e node-e2e critest critest-proxy node-conformance-ci engine-floor ## unit tests with -race, the end-to-end suite, kubelet's node suite, critest (direct, then through the pin proxy) and the node conformance suite's bounded part on a real engine, then the smoke e2e and critest on the oldest engine we serve

.PHONY: unit
unit: ## unit tests with the race detector
	go test -race -count=1 ./...

.PHONY: fuzz
fuzz: ## each Go fuzz target for FUZZTIME (default 60s), one after another, with go's execs counts
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: fuzz-ci
fuzz-ci: ## each Go fuzz target for 5s: what CI runs after verify
	FUZZTIME=5s hack/fuzz.sh

.PHONY: e2e
e2e: build ## end-to-end suite: real engine (each store in E2E_STORES), our binary, crictl
	E2E_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/e2e.sh

.PHONY: node-e2e
node-e2e: build ## kubelet (standalone, static pods) on our binary and the real engine, each store in E2E_STORES
	E2E_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/node-e2e.sh

.PHONY: critest
critest: build ## offline critest v1.37.0 (whole suite minus e2e/critest-skip.txt) against our binary, each store in E2E_STORES
	for s in $(E2E_STORES); do STORE=$$s CRITEST_STOP=1 CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/critest.sh all || exit 1; done

.PHONY: node-conformance
node-conformance: build ## Kubernetes' node conformance suite (test/e2e_node [NodeConformance] at kubelet v1.37.2, kubelet and the API server through our socket) on ours, then on upstream cri-dockerd v0.4.3, each store in E2E_STORES; table in /tmp/dockpin-nc-out/compare.md
	E2E_STORES="$(E2E_STORES)" NC_PROCS=$(or $(NC_PROCS),4) CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/node-conformance.sh compare

.PHONY: node-conformance-ci
node-conformance-ci: build ## the node conformance suite's bounded part CI runs (logs, exec, probes, restarts, termination, hostnames, security contexts), classic store, our binary
	STORE=classic NC_PART=ci NC_PROCS=2 CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/node-conformance.sh run

.PHONY: critest-proxy
critest-proxy: build ## critest through our binary as the pin proxy (classic store): in front of our binary with its pins off, then of unmodified upstream, compared spec by spec with upstream directly
	STORE=classic CRITEST_VIA_PROXY=1 CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/critest.sh all || { hack/critest.sh stop; exit 1; }
	STORE=classic CRITEST_STOP=1 CRITEST_BACKEND_BIN="$$(hack/install-upstream.sh | tail -n 1)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/critest.sh compare

.PHONY: critest-bench
critest-bench: build ## critest -benchmark (pod, container, image latencies; medians), each store in E2E_STORES
	for s in $(E2E_STORES); do STORE=$$s CRITEST_STOP=1 CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/critest.sh bench || exit 1; done

.PHONY: patches-check
patches-check: ## apply patches/ to the upstream snapshot, build it, run its unit tests and the pinning e2e against it
	hack/patches-check.sh

.PHONY: lint
lint: ## golangci-lint (installed into the tool cache on first use); //nolint names only enabled linters
	hack/check-nolint.sh
	"$$(hack/install-tools.sh golangci-lint | tail -n1)/golangci-lint" run ./... && \
	"$$(hack/install-tools.sh golangci-lint | tail -n1)/golangci-lint" run --build-tags e2e ./e2e/...

.PHONY: shellcheck
shellcheck: ## shellcheck the scripts under hack/, .ci/ and packaging/ (apt-installs shellcheck if missing)
	hack/shellcheck.sh

.PHONY: systemd-verify
systemd-verify: ## systemd-analyze verify of packaging/systemd/ (warnings fail) and the facts a drop-in's units keep
	hack/systemd-verify.sh

.PHONY: govulncheck
govulncheck: ## govulncheck ./... against an offline database built from golang.org/x/vulndb (cached)
	hack/govulncheck.sh

.PHONY: verify
verify: ## gofmt, go vet (also with -tags e2e), go mod tidy check, shellcheck, systemd units, lint, then govulncheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./... && go vet -tags e2e ./e2e/...
	go mod tidy -diff
	cd hack/tools && go vet ./... && go mod tidy -diff
	$(MAKE) shellcheck
	$(MAKE) systemd-verify
	$(MAKE) lint
	$(MAKE) govulncheck

.PHONY: bench-preload
bench-preload: build ## a restart with 20 loaded preload archives (ours against a baseline built from main), then a first start over a 5 GiB .tar.zst bundle; each store in E2E_STORES
	BENCH_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/bench-preload.sh

.PHONY: bench-lifecycle
bench-lifecycle: build ## critest lifecycle latencies, ours beside upstream cri-dockerd, alternating runs, each store in E2E_STORES
	E2E_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/bench-lifecycle.sh

.PHONY: bench-node
bench-node: build ## a full node: kubelet with 110 static pods (BENCH_NODE_PODS) on ours, then on upstream cri-dockerd, each store in E2E_STORES
	E2E_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/bench-node.sh

.PHONY: bench-lists
bench-lists: build ## 11,000 containers (BENCH_LISTS_CONTAINERS) listed by ListContainers and StreamContainers: time, answer size, our peak RSS, each store in E2E_STORES
	E2E_RUN='^$$' E2E_BENCH='ListsE2E' E2E_TIMEOUT=90m E2E_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/e2e.sh

.PHONY: engine-matrix
engine-matrix: build ## the smoke e2e and critest on every Docker Engine from 23 to 29 (ENGINES="23 29" picks), built from source and cached; one table
	ENGINES="$(ENGINES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/engine-matrix.sh

.PHONY: engine-floor
engine-floor: build ## the engine matrix's floor, Docker 23 (API 1.42): the smoke e2e and critest (classic store); the newest engine is the one every other target runs
	ENGINES=23 CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/engine-matrix.sh

.PHONY: soak
soak: build ## kubelet churning 50 pods on our binary for DURATION (default 60m), each store in E2E_STORES; fails on a leak (CI: 3m, one store)
	E2E_RUN='^TestNodeSoak$$' E2E_SOAK_DURATION=$(or $(DURATION),60m) E2E_SOAK_STORES="$(E2E_STORES)" E2E_TIMEOUT=6h \
		E2E_STORES="$(E2E_STORES)" CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/node-e2e.sh

.PHONY: bench
bench: build ## Go benchmarks (ListImages, pin matching) and e2e crictl timings with 1,000 images
	go test -run '^$$' -bench . -benchmem -count=5 ./internal/core/ ./pinning/ ./internal/pinproxy/
	CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/bench-e2e.sh

.PHONY: demo
demo: build ## install what is missing, start an engine and our binary, show crictl images -o json
	CRI_DOCKERD_BIN=$(CURDIR)/$(BIN) hack/demo.sh start

.PHONY: demo-stop
demo-stop: ## stop what `make demo` started
	hack/demo.sh stop

.PHONY: clean
clean: ## remove build output
	rm -rf _output
