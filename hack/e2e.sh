#!/usr/bin/env bash
# hack/e2e.sh — the end-to-end suite: installs what it needs (apt packages, the engine, the
# tools and upstream cri-dockerd's binary for the swap tests, cached), then runs
# `go test -tags e2e ./e2e/` once per image store in E2E_STORES, and fails when the pods' CNI
# bridge or a route into its subnet is left behind (hack/cni.sh teardown).
# Usage: CRI_DOCKERD_BIN=_output/cri-dockerd E2E_STORES="classic containerd" [E2E_RUN=regexp] [E2E_TIMEOUT=30m]
#        [E2E_BENCH=regexp (benchmarks to run once each; E2E_RUN='^$' for no tests)] hack/e2e.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN to the binary under test (make e2e does)}"
stores=${E2E_STORES:-classic containerd}
ensure_apt jq curl
ensure_docker_cli
hack/install-engine.sh >/dev/null
hack/install-tools.sh crictl registry checkpointctl >/dev/null
# criu for the engine's checkpoints (CheckpointContainer): engine.sh puts it in the engine's PATH, and
# here it goes into ours, where verbose Status looks for it, as on a node where both find /usr/sbin/criu.
PATH=$(hack/install-criu.sh | tail -n1):$PATH
# Upstream cri-dockerd's own binary, for the swap tests (TestSwap*): built once, then cached.
UPSTREAM_CRI_DOCKERD_BIN=$(hack/install-upstream.sh | tail -n1)
export UPSTREAM_CRI_DOCKERD_BIN

hold_e2e_lock
failed=()
# go test runs without the lock's descriptor (this script holds the lock), so that a binary a killed
# test leaves behind does not keep the lock from the next run.
for store in $stores; do
  log "e2e: image store $store"
  if ! E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN go test -tags e2e -count=1 -timeout "${E2E_TIMEOUT:-30m}" -v ${E2E_RUN:+-run "$E2E_RUN"} ${E2E_BENCH:+-bench "$E2E_BENCH" -benchtime 1x} ./e2e/ {DOCKPIN_E2E_LOCK_FD}>&-; then
    failed+=("$store")
  fi
done
hack/registry.sh stop >/dev/null 2>&1 || true
# The pod tests' shims used the CNI bridge (hack/cni.sh; their host-local state was in the tests' temp
# dirs); every pod went with its engine (TestMain stops it). The host must be left as the suite found it.
network_left=0
if [[ ${E2E_KEEP:-} == 1 ]]; then
  log "E2E_KEEP=1: leaving the CNI bridge in place with the stack"
elif ! hack/cni.sh teardown; then
  network_left=1
fi
if ((${#failed[@]})); then
  die "e2e failed for store(s): ${failed[*]}"
fi
((!network_left)) || die "e2e passed for store(s) $stores, but left the CNI bridge or a route into its subnet behind (see above)"
log "e2e passed for store(s): $stores"
