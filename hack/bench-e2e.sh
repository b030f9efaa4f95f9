#!/usr/bin/env bash
# hack/bench-e2e.sh — end-to-end ListImages timings on the real engine: loads BENCH_IMAGES (default
# 1000) images and runs BenchmarkListImagesE2E (gRPC and crictl, pinning on and off) once per store.
# Usage: CRI_DOCKERD_BIN=_output/cri-dockerd BENCH_STORES="classic containerd" hack/bench-e2e.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN (make bench does)}"
hack/install-engine.sh >/dev/null
hack/install-tools.sh crictl registry >/dev/null
for store in ${BENCH_STORES:-classic containerd}; do
  log "bench: image store $store, ${BENCH_IMAGES:-1000} images"
  E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN \
    go test -tags e2e -count=1 -timeout 60m -run '^$' -bench ListImagesE2E -benchtime "${BENCH_TIME:-21x}" ./e2e/
done
