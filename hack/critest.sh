#!/usr/bin/env bash
# hack/critest.sh — offline CRI conformance (critest) for our binary: a private engine pulls critest's public
# image names from a local registry through regproxy (its HTTP(S) proxy, loopback only; see hack/critest/).
# Usage: hack/critest.sh build | serve | unserve | images | run ENDPOINT [critest flags] | all | bench | compare | stop
#   all: the conformance suite (minus e2e/critest-skip.txt); bench: `critest -benchmark` with
#   hack/critest/benchmark-params.yaml, summarised as per-operation medians, its data in CRITEST_BENCH_OUT
#   (default $CRITEST_OUT/bench-$STORE) with ginkgo's JSON reports; CRITEST_BENCH_SKIP skips benchmarks
#   (regex); CRITEST_BENCH_SCRATCH_RUNS=N runs the "start a container from scratch" spec N more times alone.
# Env: STORE=classic|containerd, CRITEST_FOCUS (regex; "" = all), CRITEST_SKIP_FILE, CRITEST_STOP=1, CRI_DOCKERD_BIN,
#   CRITEST_CRI_ARGS (more flags for it, such as --log-level debug); CRITEST_NRI=1 (the default, but for bench and
#   compare: 0) runs it with --enable-nri on a socket in the private stack, passed to critest as -nri-socket, so its
#   NRI specs run; upstream cri-dockerd has no such flag, and NRI is off by default, so benchmarks run without;
#   CRITEST_VIA_PROXY=1: critest talks to CRI_DOCKERD_BIN as the pin proxy (--pin-proxy-backend) in front of a
#   backend, CRITEST_BACKEND_BIN (an unmodified cri-dockerd, say) or else CRI_DOCKERD_BIN with its pins off.
#   compare: the suite against CRITEST_BACKEND_BIN directly, then through CRI_DOCKERD_BIN as the pin proxy in front
#   of it; passes when both runs pass and fail exactly the same specs (the proxy changes nothing but `pinned`).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$HACK_DIR/.." && pwd)
: "${CRITEST_VERSION:=v1.37.0}" # sigs.k8s.io/cri-tools
: "${CRITEST_REGISTRY:=127.0.0.1:5001}"
: "${CRITEST_PROXY:=127.0.0.1:5002}" # the engine's HTTP(S) proxy: regproxy, in front of the registry
: "${CRITEST_OUT:=/tmp/dockpin-critest-out}"
export STORE=${STORE:-classic}
export STACK_DIR=/tmp/dockpin-critest-$STORE REGISTRY_ADDR=$CRITEST_REGISTRY REGISTRY_DIR=/tmp/dockpin-critest-registry
CRITEST=$TOOLS_BIN/critest-$CRITEST_VERSION
CITOOL=$TOOLS_BIN/citool
REGPROXY=$TOOLS_BIN/critest-regproxy
PROXY_PID=$REGISTRY_DIR/regproxy.pid
SKIP_FILE=${CRITEST_SKIP_FILE:-$ROOT/e2e/critest-skip.txt} # /dev/null: skip nothing
# The whole conformance suite; what cannot pass yet is in e2e/critest-skip.txt, with why.
DEFAULT_FOCUS=''

# Skips every benchmark but "start a container from scratch" (pod + container).
BENCH_NOT_SCRATCH='operations on|listing Image'

FAKE_REGISTRIES=(gcr.io registry.k8s.io k8s.gcr.io public.ecr.aws)

usage() { sed -n '4,5p' "${BASH_SOURCE[0]}" | cut -c3- >&2; exit 2; }

build() {
  build_critest
  build_tools
}

build_critest() {
  if [[ -x $CRITEST ]]; then
    log "critest $CRITEST_VERSION cached: $CRITEST"
  else
    local src tmp
    src=$(go mod download -json "sigs.k8s.io/cri-tools@$CRITEST_VERSION" | jq -r .Dir)
    tmp=$(mktemp -d /tmp/dockpin-critest-src.XXXXXX)
    cp -r "$src/." "$tmp" && chmod -R u+w "$tmp"
    log "building critest $CRITEST_VERSION"
    mkdir -p "$TOOLS_BIN"
    (cd "$tmp" && CGO_ENABLED=0 timed go test -c -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRITEST_VERSION" -o "$CRITEST.tmp" ./cmd/critest) && mv "$CRITEST.tmp" "$CRITEST"
    rm -rf "$tmp"
  fi
}

# build_tools — citool and regproxy (tiny: go's build cache makes this a no-op when their sources are unchanged).
build_tools() {
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$CITOOL" ./hack/critest/citool &&
    go build -trimpath -o "$REGPROXY" ./hack/critest/regproxy)
}

# serve — the local registry and regproxy in front of it, started unless they run (the node conformance
# suite's engine uses them too: hack/node-conformance.sh).
serve() {
  ensure_apt jq curl
  build_tools
  "$HACK_DIR/install-tools.sh" registry crictl >/dev/null
  "$HACK_DIR/registry.sh" start
  if ! pid_alive "$PROXY_PID"; then
    log "starting regproxy on $CRITEST_PROXY"
    spawn "$PROXY_PID" "$REGISTRY_DIR/regproxy.log" "$REGPROXY" "$CRITEST_PROXY" "$CRITEST_REGISTRY"
  fi
  wait_for 10 curl -fsS -x "http://$CRITEST_PROXY" http://gcr.io/v2/ || die "regproxy does not answer on $CRITEST_PROXY"
}

# unserve — stop regproxy and the registry.
unserve() {
  stop_pidfile "$PROXY_PID" regproxy 10
  "$HACK_DIR/registry.sh" stop
}

images() {
  ensure_docker_cli
  serve
  "$HACK_DIR/install-engine.sh" >/dev/null
  local extra="" h sock=$STACK_DIR/docker.sock
  for h in "${FAKE_REGISTRIES[@]}" "$CRITEST_REGISTRY"; do extra+=" --insecure-registry $h"; done
  # A dockerd left running with another proxy would pull from the internet: restart it.
  if [[ -S $sock ]] && ! curl -fsS --unix-socket "$sock" http://d/info | jq -e --arg p "http://$CRITEST_PROXY" '.HttpProxy == $p' >/dev/null; then
    "$HACK_DIR/engine.sh" stop-dockerd
  fi
  DOCKERD_PROXY=http://$CRITEST_PROXY DOCKERD_EXTRA_ARGS="${DOCKERD_EXTRA_ARGS:-}$extra" \
    "$HACK_DIR/engine.sh" start >/dev/null
  DOCKER_HOST=unix://$STACK_DIR/docker.sock CITOOL=$CITOOL "$HACK_DIR/critest/images.sh"
}


# shm_ids — ids of the host's 1 MiB System V shared memory segments, sorted.
shm_ids() { awk 'NR > 1 && $4 == 1048576 { print $2 }' /proc/sysvipc/shm | sort; }

run() {
  local ep=${1:?usage: $0 run ENDPOINT [critest flags]} out skip rc=0 args
  shift
  [[ -x $CRITEST ]] || build
  out=$CRITEST_OUT/$STORE-$(date +%Y%m%d-%H%M%S)
  mkdir -p "$out"
  args=(-runtime-endpoint="$ep" -image-endpoint="$ep" -ginkgo.no-color -ginkgo.junit-report="$out/junit.xml")
  # With -benchmark the caller names its own JSON report (the last flag wins); else this run's is here.
  args+=(-ginkgo.json-report="$out/report.json")
  LAST_RUN_OUT=$out
  [[ -z ${CRITEST_FOCUS-$DEFAULT_FOCUS} ]] || args+=(-ginkgo.focus="${CRITEST_FOCUS-$DEFAULT_FOCUS}")
  skip=$(skip_regex "$SKIP_FILE")
  [[ -z $skip ]] || args+=(-ginkgo.skip="$skip")
  log "critest $CRITEST_VERSION against $ep (focus: ${CRITEST_FOCUS-$DEFAULT_FOCUS}; skip: ${skip:-none}); log: $out/critest.log"
  local shm_before
  shm_before=$(shm_ids)
  (cd "$out" && "$CRITEST" "${args[@]}" "$@") >"$out/critest.log" 2>&1 || rc=$?
  # The HostIpc specs leave behind the 1 MiB host segments they make with ipcmk: remove those.
  comm -13 <(echo "$shm_before") <(shm_ids) | while read -r id; do ipcrm -m "$id"; done
  # critest's own summary: the failures, if any, then "Ran N of M Specs" and the counts.
  ginkgo_summary "$out/critest.log"
  grep -qE '^Ran [0-9]+ of|SUCCESS!|FAIL!' "$out/critest.log" || { tail -n 30 "$out/critest.log" >&2; ((rc)) || rc=1; }
  return "$rc"
}

# proc_usage PID — the CPU time (user + system, seconds) and peak RSS (KiB) of process PID so far, as JSON.
proc_usage() {
  local stat ticks f
  stat=$(<"/proc/$1/stat") || return 1
  ticks=$(getconf CLK_TCK)
  # Fields after the command (which may hold spaces): utime and stime are the 12th and 13th.
  read -r -a f <<<"${stat##*) }"
  jq -n --argjson cpu "$(((f[11] + f[12]) * 1000 / ticks))" --argjson rss "$(awk '/^VmHWM:/ {print $2}' "/proc/$1/status")" \
    '{cpu_s: ($cpu / 1000), rss_peak_kib: $rss}'
}

# bench_summary DIR — median, p90 and max per operation of critest's *_benchmark_data.json files.
bench_summary() {
  local f
  for f in "$1"/*_benchmark_data.json; do
    [[ -e $f ]] || continue
    jq -r --arg f "$(basename "$f" _benchmark_data.json)" '
      def q($p): sort as $v | $v[(($v | length) - 1) * $p | round];
      .operationsNames as $ops | .datapoints as $pts |
      "\($f) (N=\($pts | length), parallel=\(.numParallel // "-"))",
      ($ops | to_entries[] | .key as $i | .value as $op |
        [$pts[] | .operationsDurationsNs[$i] // empty | . / 1e6] | select(length > 0) |
        "  \($op | .[0:18] | . + " " * (18 - length)) median \(q(0.5) * 100 | round / 100) ms  p90 \(q(0.9) * 100 | round / 100) ms  max \(max * 100 | round / 100) ms")' "$f"
  done
}

cri_pidfile() { echo "$CRITEST_OUT/cri-$STORE/cri-dockerd.pid"; }
backend_pidfile() { echo "$CRITEST_OUT/cri-$STORE/backend.pid"; }

# start_cri BIN DIR — the CRI critest talks to on unix://DIR/cri-dockerd.sock: BIN itself, or with
# CRITEST_VIA_PROXY=1 BIN as the pin proxy in front of a backend on unix://DIR/backend.sock.
start_cri() {
  local bin=$1 dir=$2 sock=unix://$2/cri-dockerd.sock
  local cri=(--docker-endpoint "unix://$STACK_DIR/docker.sock" --network-plugin cni --cni-bin-dir /usr/lib/cni
    --cni-conf-dir "$dir/net.d" --cni-cache-dir "$dir/cni-cache")
  if [[ ${CRITEST_VIA_PROXY:-} == 1 ]]; then
    local backend=${CRITEST_BACKEND_BIN:-$bin} off=()
    # Our binary as the backend stands in for an unmodified one: its own pin sources off.
    [[ -n ${CRITEST_BACKEND_BIN:-} ]] || off=(--pin-from-config-labels=false --pin-from-containerd-labels=false)
    log "starting the backend $backend on unix://$dir/backend.sock"
    spawn "$(backend_pidfile)" "$dir/backend.log" "$backend" --container-runtime-endpoint "unix://$dir/backend.sock" \
      --cri-dockerd-root-directory "$dir/root" "${cri[@]}" "${off[@]}"
    wait_for 30 "$TOOLS_BIN/crictl" --runtime-endpoint "unix://$dir/backend.sock" version ||
      { tail -n 20 "$dir/backend.log" >&2; die "the backend did not start"; }
    log "starting $bin as the pin proxy on $sock"
    spawn "$(cri_pidfile)" "$dir/cri-dockerd.log" "$bin" --container-runtime-endpoint "$sock" \
      --pin-proxy-backend "unix://$dir/backend.sock" --cri-dockerd-root-directory "$dir/proxy-root" \
      --docker-endpoint "unix://$STACK_DIR/docker.sock"
  else
    # NRI on a private socket; critest's blocking-Synchronize specs hold a plugin's Synchronize for 2 s,
    # longer than the 2 s default request timeout (containerd's and CRI-O's too).
    [[ ${CRITEST_NRI:-1} != 1 ]] || cri+=(--enable-nri --nri-socket-path "$dir/nri.sock" --nri-plugin-dir "$dir/nri-plugins"
      --nri-plugin-config-dir "$dir/nri-conf" --nri-plugin-request-timeout 10s)
    log "starting $bin on $sock"
    # shellcheck disable=SC2086 # CRITEST_CRI_ARGS: extra flags, split on spaces
    spawn "$(cri_pidfile)" "$dir/cri-dockerd.log" "$bin" --container-runtime-endpoint "$sock" \
      --cri-dockerd-root-directory "$dir/root" "${cri[@]}" ${CRITEST_CRI_ARGS:-}
  fi
  wait_for 30 "$TOOLS_BIN/crictl" --runtime-endpoint "$sock" version ||
    { tail -n 20 "$dir/cri-dockerd.log" >&2; die "cri-dockerd did not start"; }
}

stop_cri() {
  stop_pidfile "$(cri_pidfile)" cri-dockerd
  stop_pidfile "$(backend_pidfile)" "cri-dockerd backend"
}

# clear_stale — a run that was killed (its engine with it) leaves its pods' containers in this private stack;
# they are removed, saying so, so that the leak check after the suite counts only this run's.
clear_stale() {
  local stale
  stale=$(docker -H "unix://$STACK_DIR/docker.sock" ps -aq --filter label=io.kubernetes.docker.type)
  [[ -n $stale ]] || return 0
  log "removing $(wc -w <<<"$stale") pod containers an earlier, interrupted run left in $STACK_DIR"
  # shellcheck disable=SC2086 # one ID per word
  docker -H "unix://$STACK_DIR/docker.sock" rm -f $stale >/dev/null
}

all() {
  local bin=${CRI_DOCKERD_BIN:-$ROOT/_output/cri-dockerd} dir=$CRITEST_OUT/cri-$STORE rc=0
  [[ -x $bin ]] || die "no $bin (run make build, or set CRI_DOCKERD_BIN)"
  timed build
  timed images
  clear_stale
  mkdir -p "$dir"
  stop_cri
  rm -rf "$dir/cri-dockerd.sock" "$dir/backend.sock" "$dir/root" "$dir/proxy-root" "$dir/cni-cache" "$dir/net.d"
  "$HACK_DIR/cni.sh" install
  CNI_DATA_DIR=$dir/ipam "$HACK_DIR/cni.sh" clean "$dir/net.d"
  CNI_DATA_DIR=$dir/ipam "$HACK_DIR/cni.sh" config "$dir/net.d"
  start_cri "$bin" "$dir"
  if [[ ${CRITEST_BENCH:-} == 1 ]]; then
    local res=${CRITEST_BENCH_OUT:-$CRITEST_OUT/bench-$STORE} i
    rm -rf "$res" && mkdir -p "$res"
    # -benchmark adds the focus "benchmark" (every benchmark): they are narrowed by skipping.
    local bench=(-benchmark -benchmarking-params-file="$HACK_DIR/critest/benchmark-params.yaml")
    [[ -z ${CRITEST_BENCH_SKIP:-} ]] || bench+=(-ginkgo.skip="$CRITEST_BENCH_SKIP")
    CRITEST_FOCUS=${CRITEST_FOCUS-} timed run "unix://$dir/cri-dockerd.sock" "${bench[@]}" \
      -benchmarking-output-dir="$res" -ginkgo.json-report="$res/report.json" || rc=$?
    # The "from scratch" spec measures one sample per run: more runs of it alone, each with its report.
    for ((i = 1; rc == 0 && i <= ${CRITEST_BENCH_SCRATCH_RUNS:-0}; i++)); do
      CRITEST_FOCUS='' run "unix://$dir/cri-dockerd.sock" "${bench[@]}" -ginkgo.skip="$BENCH_NOT_SCRATCH" \
        -ginkgo.json-report="$res/report-scratch-$i.json" >/dev/null || rc=$?
    done
    proc_usage "$(<"$(cri_pidfile)")" >"$res/cri-usage.json" || true
    bench_summary "$res"
  else
    local nri=()
    [[ ${CRITEST_VIA_PROXY:-} == 1 || ${CRITEST_NRI:-1} != 1 ]] || nri=(-nri-socket="$dir/nri.sock")
    timed run "unix://$dir/cri-dockerd.sock" "${nri[@]}" || rc=$?
  fi
  stop_cri
  pod_leaks "$dir" "after critest" || rc=1
  [[ ${CRITEST_STOP:-} != 1 ]] || stop
  return "$rc"
}

# spec_states REPORT — "STATE<TAB>spec" per spec (Its only) of a ginkgo JSON report, sorted by spec.
spec_states() {
  jq -r '.[].SpecReports[]? | select(.LeafNodeType == "It") |
    "\(.State)\t\((.ContainerHierarchyTexts // []) + [.LeafNodeText] | join(" "))"' "$1" | sort -t$'\t' -k2
}

# recheck BACKEND RES — runs each spec that ended differently again, CRITEST_RECHECKS times (default 2)
# directly and as often through the proxy, focused on it alone. Some of upstream's specs end either way
# with the timing (its log specs read a container's log while it may still be writing: "HostNetwork is
# false" failed directly and passed through the proxy in one CI run, the other way round in another), so
# a spec is a difference only when no run through the proxy ended as any run directly did. Fails on one.
recheck() {
  local backend=$1 res=$2 spec focus i d v diffs=0
  while IFS= read -r spec; do
    # shellcheck disable=SC2016 # a sed expression: $ is a character to escape
    focus=$(printf '%s' "$spec" | sed 's/[][\.*^$()+?{}|]/\\&/g')
    d=$(state_of "$res/direct.txt" "$spec") v=$(state_of "$res/via-proxy.txt" "$spec")
    for ((i = 1; i <= ${CRITEST_RECHECKS:-2}; i++)); do
      CRITEST_STOP='' CRITEST_VIA_PROXY='' CRITEST_NRI=0 CRITEST_FOCUS=$focus CRI_DOCKERD_BIN=$backend all </dev/null >/dev/null 2>&1 || true
      d+=" $(spec_states "$LAST_RUN_OUT/report.json" | state_of /dev/stdin "$spec")"
      CRITEST_STOP='' CRITEST_VIA_PROXY=1 CRITEST_FOCUS=$focus all </dev/null >/dev/null 2>&1 || true
      v+=" $(spec_states "$LAST_RUN_OUT/report.json" | state_of /dev/stdin "$spec")"
    done
    if comm -12 <(tr ' ' '\n' <<<"$d" | grep . | sort -u) <(tr ' ' '\n' <<<"$v" | grep . | sort -u) | grep -q .; then
      log "rechecked, ends either way with the timing (directly:$d; through the proxy:$v): $spec"
    else
      log "rechecked, a difference (directly:$d; through the proxy:$v): $spec"
      diffs=$((diffs + 1))
    fi
  done < <(grep '^[-+][^-+]' "$res/diff.txt" | cut -f2 | sort -u)
  return $((diffs > 0))
}

# state_of FILE SPEC — the state of SPEC in a spec_states listing ("" when it is not there).
state_of() { awk -F'\t' -v s="$2" '$2 == s { print $1 }' "$1" | head -n1; }

# compare — critest against CRITEST_BACKEND_BIN directly, then through CRI_DOCKERD_BIN as the pin proxy in
# front of it, on one engine; fails unless every spec ends the same way in both runs (pass, fail or skip).
# The direct run may fail specs (an unmodified upstream does): the proxy must neither fix nor break any.
compare() {
  local backend=${CRITEST_BACKEND_BIN:?compare needs CRITEST_BACKEND_BIN} res=$CRITEST_OUT/compare-$STORE rc=0
  local direct via
  rm -rf "$res" && mkdir -p "$res"
  log "critest directly against $backend"
  # Without NRI, as through the proxy (and an unmodified upstream has no --enable-nri).
  CRITEST_STOP='' CRITEST_VIA_PROXY='' CRITEST_NRI=0 CRI_DOCKERD_BIN=$backend all || log "direct run: rc=$? (compared below)"
  cp "$LAST_RUN_OUT/report.json" "$res/direct.json"
  log "critest through ${CRI_DOCKERD_BIN:-$ROOT/_output/cri-dockerd} as the pin proxy in front of $backend"
  CRITEST_STOP='' CRITEST_VIA_PROXY=1 all || log "run through the proxy: rc=$? (compared below)"
  cp "$LAST_RUN_OUT/report.json" "$res/via-proxy.json"
  spec_states "$res/direct.json" >"$res/direct.txt"
  spec_states "$res/via-proxy.json" >"$res/via-proxy.txt"
  direct=$(cut -f1 "$res/direct.txt" | sort | uniq -c | xargs)
  via=$(cut -f1 "$res/via-proxy.txt" | sort | uniq -c | xargs)
  log "specs directly: $direct; through the proxy: $via"
  if ! diff -u "$res/direct.txt" "$res/via-proxy.txt" >"$res/diff.txt"; then
    log "specs that ended differently through the proxy (- direct, + through the proxy):"
    grep '^[-+][^-+]' "$res/diff.txt" >&2
    recheck "$backend" "$res" || rc=1
  elif [[ ! -s $res/direct.txt ]]; then
    log "no spec results to compare"
    rc=1
  else
    log "every spec ended the same way directly and through the proxy ($(wc -l <"$res/direct.txt") specs)"
  fi
  [[ ${CRITEST_STOP:-} != 1 ]] || stop
  return "$rc"
}

stop() {
  local s
  for s in classic containerd; do
    stop_pidfile "$CRITEST_OUT/cri-$s/cri-dockerd.pid" cri-dockerd
    stop_pidfile "$CRITEST_OUT/cri-$s/backend.pid" "cri-dockerd backend"
    [[ ! -d /tmp/dockpin-critest-$s ]] || STORE=$s STACK_DIR=/tmp/dockpin-critest-$s "$HACK_DIR/engine.sh" stop
  done
  unserve
  # Last, every pod gone with its engine: the pods' host-local state and the CNI bridge with its route
  # (unless another of our stacks still uses it); fails when they are left behind.
  "$HACK_DIR/cni.sh" teardown "$CRITEST_OUT/cri-classic/ipam" "$CRITEST_OUT/cri-containerd/ipam"
}

case ${1:-} in
  build | serve | unserve | images) (($# == 1)) || usage; "$1" ;;
  all | stop) (($# == 1)) || usage; hold_e2e_lock; "$1" ;;
  bench) (($# == 1)) || usage; hold_e2e_lock; CRITEST_BENCH=1 CRITEST_NRI=${CRITEST_NRI:-0} all ;;
  compare) (($# == 1)) || usage; hold_e2e_lock; compare ;;
  run) shift; hold_e2e_lock; run "$@" ;;
  *) usage ;;
esac
