#!/usr/bin/env bash
# hack/bench-e2e.sh — end-to-end timings on the real engine, once per store: ListImages medians with
# BENCH_IMAGES (default 1000) images through gRPC and crictl, image cache on/off, pinning on/off,
# containerd pin source on/off (BenchmarkListImagesE2E), then RSS with BENCH_RSS_IMAGES (5000), then the pin
# proxy's added latency (Version, PodSandboxStatus, ListContainers, ListImages) and its RSS, in front of our
# binary (pins off) and upstream's (BenchmarkProxyE2E), then ImageFsInfo with BENCH_FSINFO_IMAGES (10,000) images
# (BenchmarkImageFsInfoE2E).
# Usage: CRI_DOCKERD_BIN=_output/cri-dockerd BENCH_STORES="classic containerd" hack/bench-e2e.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN (make bench does)}"
hack/install-engine.sh >/dev/null
ensure_docker_cli
hack/install-tools.sh crictl registry >/dev/null
# Upstream cri-dockerd's own binary, a backend of the pin proxy: built once, then cached.
UPSTREAM_CRI_DOCKERD_BIN=$(hack/install-upstream.sh | tail -n1)
export UPSTREAM_CRI_DOCKERD_BIN
for store in ${BENCH_STORES:-classic containerd}; do
  log "bench: image store $store, ${BENCH_IMAGES:-1000} images"
  # An uncached list takes seconds with the containerd store: fewer rounds there.
  rounds=${BENCH_TIME:-21x}
  [[ $store == containerd && -z ${BENCH_TIME:-} ]] && rounds=7x
  E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN \
    go test -tags e2e -count=1 -timeout 90m -run '^$' -bench 'ListImagesE2E|CacheRSSE2E|ProxyE2E' -benchtime "$rounds" ./e2e/
  # Last: it loads BENCH_FSINFO_IMAGES (default 10,000) images, more than the others want.
  E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN \
    go test -tags e2e -count=1 -timeout 90m -run '^$' -bench 'ImageFsInfoE2E' -benchtime 21x ./e2e/
done
