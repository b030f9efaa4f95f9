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
ensure_apt jq
ensure_docker_cli

# samples DIR... — every sample of the runs in DIRs as {op, ms}: critest's *_benchmark_data.json and the
# "from scratch" measurement in ginkgo's JSON reports; ops are named by the CRI call they time.
samples() {
  local d f files=()
  for d in "$@"; do
    for f in "$d"/*_benchmark_data.json "$d"/report*.json; do [[ -e $f ]] && files+=("$f"); done
  done
  ((${#files[@]})) || { echo '[]'; return; }
  jq -n '
    {CreatePod: "RunPodSandbox", StatusPod: "PodSandboxStatus", StopPod: "StopPodSandbox", RemovePod: "RemovePodSandbox",
     StatusContainer: "ContainerStatus"} as $rpc |
    [inputs |
      if type == "object" and has("operationsNames") then
        .operationsNames as $n | .datapoints[].operationsDurationsNs | to_entries[] |
        {op: ($rpc[$n[.key]] // $n[.key]), ms: (.value / 1e6)}
      else
        .[]?.SpecReports[]?.ReportEntries[]? | select(.Name == "start-container-benchmark") |
        .Value.AsJSON | fromjson | .Measurements[]? | select(.Name == "create PodSandbox and container") |
        .Durations[] | {op: "PodAndContainer", ms: (. / 1e6)}
      end]' "${files[@]}"
}

# rounds STORE — each round's samples, [{ours: [...], upstream: [...]}, ...], for the per-round ratios.
rounds() {
  local store=$1 d i out='[]'
  for d in "$BENCH_OUT/$store"/ours-*/; do
    i=${d%/}
    i=${i##*-}
    [[ -d $BENCH_OUT/$store/upstream-$i ]] || continue
    out=$(jq -c --argjson o "$(samples "$d")" --argjson u "$(samples "$BENCH_OUT/$store/upstream-$i")" \
      '. + [{ours: $o, upstream: $u}]' <<<"$out")
  done
  echo "$out"
}

# JQ_ROUNDING — jq definitions that table and phases share: q($p), the $p quantile of an array (q(0.5),
# the median), and r and r2, rounding to one and two decimals.
# shellcheck disable=SC2016 # jq variables, not the shell's
JQ_ROUNDING='def q($p): sort as $v | $v[(($v | length) - 1) * $p | round];
    def r: . * 10 | round / 10;
    def r2: . * 100 | round / 100;'

# table STORE — the per-operation table of a store's runs: the ratio of the medians of all samples, and
# the lowest and highest ratio of one round's medians (the two binaries' runs back to back, under the
# same load): a range that spans 1 is a tie.
table() {
  local store=$1
  jq -rn --arg store "$store" --argjson up "$(samples "$BENCH_OUT/$store"/upstream-*)" \
    --argjson ours "$(samples "$BENCH_OUT/$store"/ours-*)" --argjson base "$(samples "$BENCH_OUT/$store"/baseline-*)" \
    --argjson rounds "$(rounds "$store")" '
    '"$JQ_ROUNDING"'
    def stats($s; $op): [$s[] | select(.op == $op) | .ms] | if length == 0 then null else {n: length, med: q(0.5), p90: q(0.9)} end;
    def spread($op): [$rounds[] | stats(.ours; $op) as $o | stats(.upstream; $op) as $u |
      select($o != null and $u != null) | $o.med / $u.med] | if length < 2 then "-" else "\(min | r2)-\(max | r2)" end;
    ["RunPodSandbox", "PodSandboxStatus", "StopPodSandbox", "RemovePodSandbox", "CreateContainer",
     "StartContainer", "ContainerStatus", "StopContainer", "RemoveContainer", "PodAndContainer"] as $ops |
    def cell($s): if $s == null then "-" else "\($s.med | r) (\($s.p90 | r))" end;
    ($base | length > 0) as $b |
    "\($store) store: median (p90) in ms",
    "| op | n | upstream |\(if $b then " baseline |" else "" end) ours | ours/upstream | per round |",
    "|---|---|---|\(if $b then "---|" else "" end)---|---|---|",
    ($ops[] as $op | stats($up; $op) as $u | stats($ours; $op) as $o | select($u != null and $o != null) |
      "| \($op) | \($o.n) | \(cell($u)) |\(if $b then " \(cell(stats($base; $op))) |" else "" end) \(cell($o)) | \(($o.med / $u.med) | r2)x | \(spread($op)) |")'
}

# phases STORE — where ours' time went, from the "request phases" lines of its counted runs (logged at debug
# level: BENCH_OURS_ARGS=--log-level debug). Per op, medians in ms of: the RPC as ours timed it (inside the
# gRPC server); engine, its engine calls (each kind's time over its count: calls of one kind, a pod's
# containers, run at once, and kinds one after another, except RemovePodSandbox's list beside its removals,
# about 1 ms too much); CNI, the plugins (loopback beside the pod network's chain: the longer of the two);
# files (the checkpoint); ours, the RPC less these three (the spec, gRPC, logging; below zero where they ran at
# once, as in StopPodSandbox, whose CNI teardown runs beside the engine's stop); and engine/upstream, the engine
# calls' median over upstream's median of the op: what any shim making these calls waits for, as a share of
# upstream's time. Ops that made no call (served from memory) log no phases.
phases() {
  local store=$1 logs
  logs=("$BENCH_OUT/$store"/ours-*.cri.log)
  [[ -e ${logs[0]} ]] && grep -q 'msg="request phases"' "${logs[@]}" || return 0
  grep -h 'msg="request phases"' "${logs[@]}" | jq -Rrn --arg store "$store" \
    --argjson up "$(samples "$BENCH_OUT/$store"/upstream-*)" '
    def ms: if test("^-?[0-9.]+ms$") then .[:-2] | tonumber
      elif test("^-?[0-9.]+(µs|us)$") then (.[:-2] | tonumber) / 1e3
      elif test("^-?[0-9.]+ns$") then (.[:-2] | tonumber) / 1e6
      elif test("^-?[0-9.]+s$") then (.[:-1] | tonumber) * 1e3
      elif test("^[0-9]+m[0-9.]+s$") then capture("^(?<m>[0-9]+)m(?<s>[0-9.]+)s$") | (.m | tonumber) * 6e4 + (.s | tonumber) * 1e3
      else error("duration \(.)") end;
    def field($k): capture(" \($k)=\"?(?<v>[^ \"]+)").v; # logrus quotes a value with a µ
    # phase: "12.50ms" or "25.00ms/2" (two calls) -> {ms, n}
    def phase: capture("^(?<d>[^/]+)(/(?<n>[0-9]+))?$") | {ms: (.d | ms), n: ((.n // "1") | tonumber)};
    '"$JQ_ROUNDING"'
    [inputs | . as $line |
      [scan(" t\\.(?<k>[a-z.]+)=\"?(?<v>[^ \"]+)") | {key: .[0], value: .[1]}] | from_entries as $p |
      {op: ($line | field("rpc")), d: ($line | field("duration") | ms),
       engine: ([$p | to_entries[] | select(.key | startswith("engine.")) | .value | phase | .ms / .n] | add // 0),
       cni: ([$p | to_entries[] | select(.key | startswith("cni.")) | {lo: (.key | startswith("cni.loopback.")), ms: (.value | phase | .ms)}] |
         [([.[] | select(.lo) | .ms] | add // 0), ([.[] | select(.lo | not) | .ms] | add // 0)] | max),
       files: ([$p | to_entries[] | select(.key | startswith("checkpoint.")) | .value | phase | .ms] | add // 0)} |
      .engine = ([.engine, .d] | min) | .own = .d - .engine - .cni - .files] as $s |
    "\($store) store, ours: where the time went (medians in ms)",
    "| op | n | RPC | engine | CNI | files | ours | upstream | engine/upstream |",
    "|---|---|---|---|---|---|---|---|---|",
    (["RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer", "StartContainer", "StopContainer",
      "RemoveContainer"][] as $op | [$s[] | select(.op == $op)] | select(length > 0) |
      ([$up[] | select(.op == $op) | .ms] | if length > 0 then q(0.5) else null end) as $u |
      "| \($op) | \(length) | \([.[].d] | q(0.5) | r) | \([.[].engine] | q(0.5) | r) | \([.[].cni] | q(0.5) | r) | \([.[].files] | q(0.5) | r) | \([.[].own] | q(0.5) | r) | \(if $u then $u | r else "-" end) | \(if $u then ([.[].engine] | q(0.5)) / $u | r2 | tostring + "x" else "-" end) |")'
}

# usage STORE — each binary's CPU time per critest run (its whole life: start, the benchmarks, the "from
# scratch" runs) and peak RSS, from hack/critest.sh's cri-usage.json.
usage() {
  local store=$1 who files
  for who in upstream baseline ours; do
    files=("$BENCH_OUT/$store/$who"-*/cri-usage.json)
    [[ -e ${files[0]} ]] || continue
    jq -rs --arg who "$who" 'def med: sort | .[(length - 1) / 2 | floor];
      "\($who): cri-dockerd CPU \([.[].cpu_s] | med) s per run (median of \(length)), peak RSS \([.[].rss_peak_kib] | max / 1024 | . * 10 | round / 10) MiB"' "${files[@]}"
  done
}

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
  "") main ;;
  table) # the tables of the last run's data: hack/bench-lifecycle.sh table [STORE...]
    shift
    if (($# == 0)); then read -ra stores <<<"$STORES" && set -- "${stores[@]}"; fi
    for s in "$@"; do table "$s" && usage "$s" && phases "$s"; done
    ;;
  *) sed -n '2,12p' "${BASH_SOURCE[0]}" | cut -c3- >&2; exit 2 ;;
esac
