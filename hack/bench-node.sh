#!/usr/bin/env bash
# hack/bench-node.sh — a full node, ours beside upstream cri-dockerd on the same engine: kubelet
# (standalone, static pods, hack/kubelet.sh) with BENCH_NODE_PODS (default 110) pods, for each store in
# E2E_STORES (BenchmarkNodeE2E: pod start p50/p90/p99 and time to all, steady-state CPU of each process,
# RSS, PLEG relist, /stats/summary and crictl stats/statsp latencies, teardown times, residue checked).
# Installs what it needs as hack/e2e.sh does and holds the e2e lock.
# Env: CRI_DOCKERD_BIN (ours), E2E_STORES (default: classic containerd), BENCH_NODE_PODS (110),
#   BENCH_NODE_STEADY_SECONDS (120), BENCH_NODE_ROUNDS (runs of each binary, alternating first; default 1),
#   BENCH_NODE_ARRIVAL_RATE (pods/s of the arrival run, default 1; 0: none), BENCH_NODE_GATES (kubelet feature
#   gates, space-separated: a run of ours with each on), BENCH_NODE_SHIM_FLAGS (more flags for ours), BENCH_NODE_PPROF=DIR
#   (a CPU profile of ours over the steady state), BENCH_NODE_RUN (the -bench regexp, say
#   'NodeE2E/binary=ours/arrival' for one run).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN (make bench-node does)}"
ensure_apt jq curl
ensure_docker_cli
hack/install-engine.sh >/dev/null
hack/install-tools.sh crictl registry >/dev/null
KUBELET_BIN=$(hack/install-kubelet.sh | tail -n1)
UPSTREAM_CRI_DOCKERD_BIN=$(hack/install-upstream.sh | tail -n1)
export KUBELET_BIN UPSTREAM_CRI_DOCKERD_BIN E2E_NODE=1
hold_e2e_lock
for store in ${E2E_STORES:-classic containerd}; do
  log "bench-node: image store $store, ${BENCH_NODE_PODS:-110} pods"
  E2E_STORE=$store CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN \
    go test -tags e2e -count=1 -timeout 180m -run '^$' -bench "${BENCH_NODE_RUN:-NodeE2E}" -benchtime 1x ./e2e/
done
hack/registry.sh stop >/dev/null 2>&1 || true
hack/cni.sh teardown
