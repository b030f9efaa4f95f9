#!/usr/bin/env bash
# hack/bench-lifecycle.sh — pod and container lifecycle latencies of our binary beside upstream cri-dockerd
# (built from the snapshot by hack/install-upstream.sh) on the same engine: critest's lifecycle benchmarks
# (`hack/critest.sh bench`, hack/critest/benchmark-params.yaml) for each store, the binaries alternating
# with the order turning every round (ours, upstream, upstream, ours, ...; with a baseline, a rotation) after
# BENCH_WARMUP runs of each that are not counted, then per operation the median and p90 of every sample of
# each binary and the ratio of the medians, ours/upstream. "PodAndContainer" is critest's "start a container
# from scratch": RunPodSandbox, ImageStatus, CreateContainer, StartContainer, StopPodSandbox and
# RemovePodSandbox in a row, one sample per critest run (BENCH_SCRATCH_RUNS more runs of it alone).
# Holds /tmp/dockpin-e2e.lock while it uses the engine, so that no other run disturbs the timings.
# Env: CRI_DOCKERD_BIN (ours), UPSTREAM_CRI_DOCKERD_BIN, E2E_STORES (default: classic containerd),
#   BENCH_RUNS (runs of each binary per store, default 2), BENCH_WARMUP (default 1), BENCH_SCRATCH_RUNS (default 4),
#   BENCH_OUT (results, default /tmp/dockpin-bench-lifecycle; the data of the last run is kept there),
#   BENCH_BASELINE_BIN (a third binary in the rotation, say ours before a change: a "baseline" column),
#   BENCH_OURS_ARGS (more flags for ours and the baseline, e.g. --log-level debug for the phase timings
#   in $BENCH_OUT/STORE/ours-N.cri.log and a table of them per store: see phases).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$HACK_DIR/.." && pwd)
: "${BENCH_RUNS:=2}" "${BENCH_WARMUP:=1}" "${BENCH_SCRATCH_RUNS:=4}" "${BENCH_OUT:=/tmp/dockpin-bench-lifecycle}"
OURS=${CRI_DOCKERD_BIN:-$ROOT/_output/cri-dockerd}
STORES=${E2E_STORES:-classic containerd}
# critest's lifecycle specs are the pod and container cycles and the start from scratch: not the images'.
SKIP=Image

[[ -x $OURS ]] || die "no $OURS (run make build, or set CRI_DOCKERD_BIN)"
UPSTREAM=${UPSTREAM_CRI_DOCKERD_BIN:-$("$HACK_DIR/install-upstream.sh" | tail -n1)}
ensure_docker_cli

# BENCHTOOL computes the tables from the runs' output (hack/benchtool, built once per run): table, the
# per-op medians (p90) of each binary, the ratio of the medians and the range of the per-round ratios (the
# two binaries' runs back to back, under the same load: a range that spans 1 is a tie); usage, each
# binary's CPU time per critest run and peak RSS; phases, where ours' time went per op, from the "request
# phases" lines of its counted runs (BENCH_OURS_ARGS=--log-level=debug): the RPC, its engine calls, the
# CNI plugins, the checkpoint files, ours (the rest), and the engine calls' median over upstream's median.
BENCHTOOL=$BENCH_OUT/benchtool
build_benchtool() {
  mkdir -p "$BENCH_OUT"
  (cd "$HACK_DIR/.." && go build -o "$BENCHTOOL" ./hack/benchtool)
}
table() { "$BENCHTOOL" table "$BENCH_OUT" "$1"; }
usage() { "$BENCHTOOL" usage "$BENCH_OUT" "$1"; }
phases() { "$BENCHTOOL" phases "$BENCH_OUT" "$1"; }

# run_one STORE WHO BIN I — one critest run; a failed one is retried once (a run elsewhere that does not
# take the lock may have taken the shared CNI bridge away under it).
run_one() {
  local store=$1 who=$2 i=$4
  clean "$store"
  bench_one "$@" && return
  log "bench-lifecycle: $store store, $who run $i failed (log: $who-$i.failed.log): retrying once"
  mv "$BENCH_OUT/$store/$who-$i.log" "$BENCH_OUT/$store/$who-$i.failed.log"
  clean "$store"
  bench_one "$@" || { tail -n 40 "$BENCH_OUT/$store/$who-$i.log" >&2; die "critest bench of $who failed ($store store)"; }
}

# clean STORE — removes the pods that earlier runs (a failed one, or another user's) left in the store's
# critest engine, which is started for that when it is not running (its data outlives it).
clean() {
  local docker=(docker -H "unix:///tmp/dockpin-critest-$1/docker.sock")
  if ! "${docker[@]}" info >/dev/null 2>&1; then
    STORE=$1 CRITEST_OUT=$BENCH_OUT/critest "$HACK_DIR/critest.sh" images >>"$BENCH_OUT/$1/setup.log" 2>&1 || return 0
  fi
  "${docker[@]}" ps -aq --filter label=io.kubernetes.docker.type | xargs -r "${docker[@]}" rm -f >/dev/null
}

bench_one() { # bench_one STORE WHO BIN I
  local store=$1 who=$2 bin=$3 i=$4 args=${BENCH_OURS_ARGS:-} rc=0
  [[ $who != *upstream ]] || args=
  log "bench-lifecycle: $store store, $who run $i ($bin)"
  # critest.sh appends to the CRI's log: keep only this run's lines.
  local crilog=$BENCH_OUT/critest/cri-$store/cri-dockerd.log from=0
  [[ ! -e $crilog ]] || from=$(stat -c %s "$crilog")
  CRITEST_CRI_ARGS=$args STORE=$store CRI_DOCKERD_BIN=$bin CRITEST_OUT=$BENCH_OUT/critest CRITEST_BENCH_SKIP=$SKIP \
    CRITEST_BENCH_OUT=$BENCH_OUT/$store/$who-$i CRITEST_BENCH_SCRATCH_RUNS=$BENCH_SCRATCH_RUNS \
    "$HACK_DIR/critest.sh" bench >"$BENCH_OUT/$store/$who-$i.log" 2>&1 || rc=$?
  tail -c +$((from + 1)) "$crilog" >"$BENCH_OUT/$store/$who-$i.cri.log" 2>/dev/null || true
  return "$rc"
}

# stop_stack — stops the critest engines, the registry and the CRI (and removes the CNI bridge).
stop_stack() { CRITEST_OUT=$BENCH_OUT/critest "$HACK_DIR/critest.sh" stop >"$BENCH_OUT/stop.log" 2>&1; }

main() {
  local start=$SECONDS waited store i k who order whos=(ours upstream)
  local -A bins=([ours]=$OURS [upstream]=$UPSTREAM [baseline]=${BENCH_BASELINE_BIN:-})
  [[ -z ${BENCH_BASELINE_BIN:-} ]] || whos+=(baseline)
  # The engine lock for the whole rotation (hack/lib.sh: the engine and registry spawned under it do not
  # keep it; a lock the caller took with `flock /tmp/dockpin-e2e.lock ...` is reused).
  hold_e2e_lock
  waited=$((SECONDS - start))
  log "bench-lifecycle: got the lock after ${waited}s; ours: $OURS ($("$OURS" --version 2>&1 | head -n1)); upstream: $UPSTREAM"
  mkdir -p "$BENCH_OUT"
  trap stop_stack EXIT
  for store in $STORES; do
    rm -rf "${BENCH_OUT:?}/$store" && mkdir -p "$BENCH_OUT/$store"
    # Warm-up runs, not counted: the first runs after the engine starts are slower (cold caches, the
    # first pause container), which would count against whichever binary goes first.
    for ((i = 1; i <= BENCH_WARMUP; i++)); do
      for who in "${whos[@]}"; do run_one "$store" "warmup-$who" "${bins[$who]}" "$i"; done
    done
    # The order turns each round (ours, upstream, upstream, ours, ...; with a baseline, a rotation), so
    # that no binary always runs right after another one's run.
    for ((i = 1; i <= BENCH_RUNS; i++)); do
      k=$(((i - 1) % ${#whos[@]}))
      order=("${whos[@]:k}" "${whos[@]:0:k}")
      for who in "${order[@]}"; do run_one "$store" "$who" "${bins[$who]}" "$i"; done
    done
  done
  trap - EXIT
  stop_stack || { tail -n 20 "$BENCH_OUT/stop.log" >&2; die "critest stop failed"; }
  [[ -z ${DOCKPIN_E2E_LOCK_FD:-} ]] || flock -u "$DOCKPIN_E2E_LOCK_FD"
  for store in $STORES; do
    echo
    table "$store"
    usage "$store"
    phases "$store"
  done
  log "bench-lifecycle: ${BENCH_RUNS} runs of each binary per store in $((SECONDS - start - waited))s under the lock"
}

case ${1:-} in
  "") build_benchtool && main ;;
  table) # the tables of the last run's data: hack/bench-lifecycle.sh table [STORE...]
    shift
    if (($# == 0)); then read -ra stores <<<"$STORES" && set -- "${stores[@]}"; fi
    build_benchtool
    for s in "$@"; do table "$s" && usage "$s" && phases "$s"; done
    ;;
  *) sed -n '2,12p' "${BASH_SOURCE[0]}" | cut -c3- >&2; exit 2 ;;
esac
