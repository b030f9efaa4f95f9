#!/usr/bin/env bash
# hack/engine-matrix.sh — our binary on every Docker Engine nodes run. For each ENGINE in ENGINES
# (default: 23 to 29, see lib.sh's engine_row) it builds or reuses that engine (hack/install-engine.sh),
# runs the smoke e2e (MATRIX_E2E_RUN) and critest on the classic image store (the store of Docker 23
# to 28 unless an operator opts in; CI covers 29 on both stores), and prints one table, also written to
# MATRIX_OUT/results.md beside every step's log. An engine that cannot be built is reported with the
# build's own last lines, and the next engine goes on.
# Usage: CRI_DOCKERD_BIN=_output/cri-dockerd [ENGINES="23 29"] [MATRIX_CRITEST=0] [MATRIX_OUT=dir] hack/engine-matrix.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$HACK_DIR/.." && pwd)
: "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN to the binary under test (make engine-matrix does)}"
: "${MATRIX_OUT:=$ROOT/_output/engine-matrix}"
read -ra engines <<<"${ENGINES:-${ENGINE_MATRIX[*]}}"

# The smoke e2e: the version handshake, pins from every source (sandbox image, image config label,
# patterns, pins file and directory, preloaded archive, a pinned image refused by rmi), a pod on CNI
# with a web server, exec and port-forward, logs and stats, a sandbox through a restart of our binary
# and after its pause container died, container events, and the swap from and to upstream.
SMOKE='^(TestVersionAndStatus|TestPinnedImagesCrictl|TestPinsFileReloadOnSIGHUP|TestPinsDirWatched|TestPreloadedImagesPinned|TestStickyCrictlRmi|TestContainerInCNIPod|TestPodSandboxLifecycle|TestPodSandboxWithCrictl|TestStreamingWithCrictl|TestPodSandboxSurvivesRestart|TestPodSandboxAfterCrash|TestContainerStatsFromCgroups|TestContainerEvents|TestSwapUpstreamToOurs|TestSwapOursToUpstream)$'
: "${MATRIX_E2E_RUN:=$SMOKE}"

# summary_e2e LOG — "N passed, M failed" of go test -v's top-level results, and the failed tests.
summary_e2e() {
  local pass fail names
  pass=$(grep -c '^--- PASS' "$1" || true)
  fail=$(grep -c '^--- FAIL' "$1" || true)
  names=$(sed -n 's/^--- FAIL: \([^ ]*\).*/\1/p' "$1" | paste -sd, -)
  echo "$pass passed, $fail failed${names:+ ($names)}"
}

# summary_critest LOG — ginkgo's own summary ("119 Passed | 0 Failed | 0 Pending | 23 Skipped"), as
# "119 passed, 0 failed, 23 skipped" for the table.
summary_critest() {
  local line
  line=$(grep -aoE '[0-9]+ Passed \| [0-9]+ Failed( \| [0-9]+ Pending)? \| [0-9]+ Skipped' "$1" | tail -n1 |
    sed -E 's/ \| 0 Pending//; s/ \| /, /g' | tr '[:upper:]' '[:lower:]')
  echo "${line:-no summary (see $1)}"
}

# run_engine N — one row of the table.
run_engine() {
  local n=$1 dir=$MATRIX_OUT/$1 bin docker containerd runc api e2e critest="not run" t0=$SECONDS
  mkdir -p "$dir"
  if [[ $n == 29 ]]; then
    read -r docker containerd runc <<<"$DOCKER_VERSION_STRING $CONTAINERD_VERSION $RUNC_VERSION"
  else
    read -r docker containerd runc <<<"$(engine_row "$n")"
    docker=${docker#v}
  fi
  log "engine $n: Docker $docker, containerd $containerd, runc $runc"
  if ! bin=$(ENGINE=$n ENGINE_BIN='' hack/install-engine.sh 2>"$dir/build.log" | tail -n1); then
    log "engine $n: the build failed; its last lines:"
    grep -v '^go: downloading' "$dir/build.log" | tail -n 15 >&2
    printf '| %s | %s | - | %s | %s | build failed: %s | - | - | |\n' "$n" "$docker" "$containerd" "$runc" \
      "$(grep -v '^go: downloading' "$dir/build.log" | grep -v '^\[' | tail -n1 | tr '|' '/')" >>"$MATRIX_OUT/rows"
    return
  fi
  log "engine $n: binaries in $bin"
  local notes=""
  [[ ! -f $bin/replaced ]] || notes="built with $(paste -sd, "$bin/replaced" | sed 's/=[^,]*@/ → /g')"
  ENGINE=$n ENGINE_BIN='' E2E_STORES=classic E2E_RUN=$MATRIX_E2E_RUN CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN \
    hack/e2e.sh >"$dir/e2e.log" 2>&1 || true
  api=$(sed -n 's/^e2e: store=.*"ApiVersion":"\([0-9.]*\)".*/\1/p' "$dir/e2e.log" | head -n1)
  e2e=$(summary_e2e "$dir/e2e.log")
  log "engine $n: e2e $e2e"
  if [[ ${MATRIX_CRITEST:-1} == 1 ]]; then
    ENGINE=$n ENGINE_BIN='' STORE=classic CRITEST_STOP=1 CRI_DOCKERD_BIN=$CRI_DOCKERD_BIN hack/critest.sh all >"$dir/critest.log" 2>&1 || true
    critest=$(summary_critest "$dir/critest.log")
    log "engine $n: critest $critest"
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %ss | %s |\n' "$n" "$docker" "${api:-?}" "$containerd" "$runc" \
    "$e2e" "$critest" "$((SECONDS - t0))" "$notes" >>"$MATRIX_OUT/rows"
}

main() {
  (($# == 0)) || { sed -n '8p' "${BASH_SOURCE[0]}" | cut -c3- >&2; exit 2; }
  mkdir -p "$MATRIX_OUT"
  rm -f "$MATRIX_OUT/rows"
  local n
  for n in "${engines[@]}"; do
    [[ $n == 29 ]] || engine_row "$n" >/dev/null || die "no engine $n in the matrix (${ENGINE_MATRIX[*]})"
  done
  for n in "${engines[@]}"; do
    run_engine "$n"
  done
  {
    echo "Engine matrix, $(date -u +%Y-%m-%d), $(uname -r), binary $("$CRI_DOCKERD_BIN" --version 2>&1 | head -n1), classic store"
    echo
    echo '| engine | Docker | API | containerd | runc | smoke e2e | critest | time | notes |'
    echo '|---|---|---|---|---|---|---|---|---|'
    cat "$MATRIX_OUT/rows"
  } >"$MATRIX_OUT/results.md"
  cat "$MATRIX_OUT/results.md"
  ! grep -qE 'build failed|[1-9][0-9]* failed|[1-9][0-9]* pending|no summary' "$MATRIX_OUT/rows"
}

main "$@"
