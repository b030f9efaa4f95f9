#!/usr/bin/env bash
# hack/critest.sh — offline CRI conformance (critest) for our binary: a private engine pulls critest's public
# image names from a local registry through regproxy (its HTTP(S) proxy, loopback only; see hack/critest/).
# Usage: hack/critest.sh build | images | run ENDPOINT [critest flags] | all | stop
# Env: STORE=classic|containerd, CRITEST_FOCUS (regex; "" = all), CRITEST_SKIP_FILE, CRITEST_STOP=1, CRI_DOCKERD_BIN.
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
# The ImageService specs: pkg/validate/image.go and image_consistency.go (no pods needed).
DEFAULT_FOCUS='\[k8s\.io\] (Image Manager|Image Consistency) '
FAKE_REGISTRIES=(gcr.io registry.k8s.io k8s.gcr.io public.ecr.aws)

usage() { sed -n '4,5p' "${BASH_SOURCE[0]}" | cut -c3- >&2; exit 2; }

build() {
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
  # Tiny: go's build cache makes these no-ops when the sources are unchanged.
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$CITOOL" ./hack/critest/citool &&
    go build -trimpath -o "$REGPROXY" ./hack/critest/regproxy)
}

images() {
  ensure_apt jq curl
  command -v docker >/dev/null || die "needs the docker CLI on PATH"
  [[ -x $CITOOL && -x $REGPROXY ]] || build
  "$HACK_DIR/install-engine.sh" >/dev/null
  "$HACK_DIR/install-tools.sh" registry crictl >/dev/null
  "$HACK_DIR/registry.sh" start
  if ! pid_alive "$PROXY_PID"; then
    log "starting regproxy on $CRITEST_PROXY"
    spawn "$PROXY_PID" "$REGISTRY_DIR/regproxy.log" "$REGPROXY" "$CRITEST_PROXY" "$CRITEST_REGISTRY"
  fi
  wait_for 10 curl -fsS -x "http://$CRITEST_PROXY" http://gcr.io/v2/ || die "regproxy does not answer on $CRITEST_PROXY"
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

# skip_regex — the regexes of e2e/critest-skip.txt joined with |; every entry needs a "# reason".
skip_regex() {
  local line n=0 out=()
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
    [[ $line =~ ^[[:space:]]*(.*[^[:space:]])[[:space:]]+#[[:space:]]*[^[:space:]] ]] ||
      die "$SKIP_FILE:$n: want 'REGEX  # reason', got: $line"
    out+=("${BASH_REMATCH[1]}")
  done <"$SKIP_FILE"
  local IFS='|'
  echo "${out[*]}"
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
  [[ -z ${CRITEST_FOCUS-$DEFAULT_FOCUS} ]] || args+=(-ginkgo.focus="${CRITEST_FOCUS-$DEFAULT_FOCUS}")
  skip=$(skip_regex)
  [[ -z $skip ]] || args+=(-ginkgo.skip="$skip")
  log "critest $CRITEST_VERSION against $ep (focus: ${CRITEST_FOCUS-$DEFAULT_FOCUS}; skip: ${skip:-none}); log: $out/critest.log"
  local shm_before
  shm_before=$(shm_ids)
  (cd "$out" && "$CRITEST" "${args[@]}" "$@") >"$out/critest.log" 2>&1 || rc=$?
  # The HostIpc specs leave behind the 1 MiB host segments they make with ipcmk: remove those.
  comm -13 <(echo "$shm_before") <(shm_ids) | while read -r id; do ipcrm -m "$id"; done
  # critest's own summary: the failures, if any, then "Ran N of M Specs" and the counts.
  awk '/^Summarizing [0-9]+ Failure/ || /^Ran [0-9]+ of [0-9]+ Specs/ {p = 1} p && !/^(--- |FAIL$|PASS$)/' "$out/critest.log"
  grep -qE '^Ran [0-9]+ of' "$out/critest.log" || { tail -n 30 "$out/critest.log" >&2; ((rc)) || rc=1; }
  return "$rc"
}

cri_pidfile() { echo "$CRITEST_OUT/cri-$STORE/cri-dockerd.pid"; }

all() {
  local bin=${CRI_DOCKERD_BIN:-$ROOT/_output/cri-dockerd} dir=$CRITEST_OUT/cri-$STORE rc=0
  [[ -x $bin ]] || die "no $bin (run make build, or set CRI_DOCKERD_BIN)"
  timed build
  timed images
  mkdir -p "$dir"
  stop_pidfile "$(cri_pidfile)" cri-dockerd
  rm -f "$dir/cri-dockerd.sock"
  log "starting $bin on unix://$dir/cri-dockerd.sock"
  spawn "$(cri_pidfile)" "$dir/cri-dockerd.log" "$bin" --container-runtime-endpoint "unix://$dir/cri-dockerd.sock" \
    --docker-endpoint "unix://$STACK_DIR/docker.sock" --cri-dockerd-root-directory "$dir/root" --network-plugin ""
  wait_for 30 "$TOOLS_BIN/crictl" --runtime-endpoint "unix://$dir/cri-dockerd.sock" version ||
    { tail -n 20 "$dir/cri-dockerd.log" >&2; die "cri-dockerd did not start"; }
  timed run "unix://$dir/cri-dockerd.sock" || rc=$?
  stop_pidfile "$(cri_pidfile)" cri-dockerd
  [[ ${CRITEST_STOP:-} != 1 ]] || stop
  return "$rc"
}

stop() {
  local s
  for s in classic containerd; do
    stop_pidfile "$CRITEST_OUT/cri-$s/cri-dockerd.pid" cri-dockerd
    [[ ! -d /tmp/dockpin-critest-$s ]] || STORE=$s STACK_DIR=/tmp/dockpin-critest-$s "$HACK_DIR/engine.sh" stop
  done
  stop_pidfile "$PROXY_PID" regproxy 10
  "$HACK_DIR/registry.sh" stop
}

case ${1:-} in
  build | images | all | stop) (($# == 1)) || usage; "$1" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
