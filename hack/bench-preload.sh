#!/usr/bin/env bash
# hack/bench-preload.sh — a restart of cri-dockerd with BENCH_PRELOAD_ARCHIVES (default 20) preload archives
# of BENCH_PRELOAD_MB (default 20) MB each, already loaded at an earlier start: seconds until the socket
# serves and until every image is listed pinned, for our binary and for a baseline built from
# PRELOAD_BASELINE_REV (default main; "" skips it), once per store in BENCH_STORES (BenchmarkPreloadRestartE2E);
# then a first start (nothing saved) over one k3s-style .tar.zst bundle of BENCH_BUNDLE_MB (default 5120) MiB
# of 256 MiB images, half of them in the engine already: seconds to serve, to the first ListImages answer, until
# the bundle is read, until the known pin is leased, until all is loaded and pinned; refusals; peak RSS
# (BenchmarkPreloadFirstStartBundleE2E; needs about 3x the bundle's size free on the engine's disk and /tmp).
# Usage: CRI_DOCKERD_BIN=_output/cri-dockerd [PRELOAD_BASELINE_REV=main] [BENCH_STORES="classic containerd"]
#        [BENCH_BUNDLE_MB=5120 (0 skips it)] [BENCH_PRELOAD_RESTART=0 (skips the restart part)] hack/bench-preload.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN to the binary under test}"
hack/install-engine.sh >/dev/null
ensure_docker_cli
hack/install-tools.sh crictl registry >/dev/null
rev=${PRELOAD_BASELINE_REV-main}
if [[ -n $rev ]]; then
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  git archive "$rev" | tar -x -C "$src"
  (cd "$src" && go build -o "$src/cri-dockerd-baseline" ./cmd/cri-dockerd)
  export PRELOAD_BASELINE_BIN=$src/cri-dockerd-baseline
  log "bench: baseline built from $rev ($(git rev-parse --short "$rev"))"
fi
hold_e2e_lock
for store in ${BENCH_STORES:-classic containerd}; do
  log "bench: image store $store"
  if [[ ${BENCH_PRELOAD_RESTART:-1} != 0 ]]; then
    E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN \
      go test -tags e2e -count=1 -timeout 90m -run '^$' -bench 'PreloadRestartE2E' -benchtime "${BENCH_TIME:-3x}" ./e2e/
  fi
  if [[ ${BENCH_BUNDLE_MB:-5120} != 0 ]]; then
    E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN BENCH_BUNDLE_MB=${BENCH_BUNDLE_MB:-5120} \
      go test -tags e2e -count=1 -timeout 120m -run '^$' -bench 'PreloadFirstStartBundleE2E' -benchtime 1x -v ./e2e/
  fi
done
hack/registry.sh stop >/dev/null 2>&1 || true
