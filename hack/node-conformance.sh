#!/usr/bin/env bash
# hack/node-conformance.sh — Kubernetes' own node conformance suite (k8s.io/kubernetes test/e2e_node at
# KUBELET_VERSION, its [NodeConformance] specs) through a CRI binary on a private engine, offline.
#
# The suite runs as it does in Kubernetes' CI ("local" mode): e2e_node.test starts etcd, kube-apiserver and
# the namespace controller inside itself and kubelet (our build) beside them, then drives pods through the
# API server. Everything runs in one private mount namespace, where a private directory is /var: kubelet's
# root dir /var/lib/kubelet and the pod and container logs under /var/log, paths the suite's specs name,
# are the same for kubelet, the CRI binary and the engine (started inside too), and nothing is written to
# the host's /var. Kubelet's wanted sysctls are files bind-mounted over /proc/sys (protectKernelDefaults),
# and systemd-run is hidden, so the suite starts kubelet as a child instead of a systemd unit.
# Images: the suite's public names (test/utils/image/manifest.go) are built here (hack/critest/images.sh,
# RECIPE=node-conformance) and served by the local registry through regproxy (hack/critest.sh serve).
#
# Usage: CRI_DOCKERD_BIN=BIN [STORE=classic|containerd] [NC_PART=all|ci] hack/node-conformance.sh run
#        hack/node-conformance.sh stop       stop what an interrupted run left (each store)
#        hack/node-conformance.sh list       the specs a part runs, without running them
#        hack/node-conformance.sh compare    run, for ours and then upstream v0.4.3, each store in E2E_STORES;
#                                            a table of both in NC_OUT/compare.md
# Parts: all = every [NodeConformance] spec but [Serial] ones, then the [Serial] ones in a pass of their own;
#        ci  = the bounded part CI runs: the specs that touch what the CRI binary owns (NC_CI_FOCUS).
# Env: NC_FOCUS (a regex: the specs of the part's passes to run; for ci, instead of its own focus),
#      NC_SKIP_FILE (default e2e/node-conformance-skip.txt, "REGEX  # reason" lines), NC_SKIP (a regex of
#      more specs to leave out of this run), NC_SUITE_ARGS (more flags for e2e_node.test, such as
#      --feature-gates=...), NC_OUT (default /tmp/dockpin-nc-out), NC_CRI_ARGS (more flags for the binary),
#      NC_PROCS (ginkgo processes, default 1).
# The report of a pass: NC_OUT/NAME-STORE-DATE-PASS/ (NAME: NC_NAME, ours or upstream; report.json,
# junit.xml, the suite's, kubelet's and the binary's logs).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$HACK_DIR/.." && pwd)
STORE=${STORE:-classic}
: "${NC_OUT:=/tmp/dockpin-nc-out}"
: "${CRITEST_REGISTRY:=127.0.0.1:5001}" # hack/critest.sh's registry and regproxy
: "${CRITEST_PROXY:=127.0.0.1:5002}"
# set_store — the paths of STORE's private stack.
set_store() {
  DIR=$NC_OUT/$STORE
  export STACK_DIR=$DIR/stack STORE NC_NAME=${NC_NAME:-ours}
}
set_store
SKIP_FILE=${NC_SKIP_FILE:-$ROOT/e2e/node-conformance-skip.txt}
E2E_NODE_DIR=$DOCKPIN_CACHE/e2e-node/$KUBELET_VERSION
REGISTRIES=(registry.k8s.io gcr.io)

# The specs of the suite that exercise what the CRI binary owns, for CI's bounded part: container logs and
# their paths, exec and logs through the API server, probes, restarts and restart policies, termination
# messages, image pulls, /etc/hosts and hostnames, security contexts, volumes' mounts, env and commands.
NC_CI_FOCUS='ContainerLogPath|Container Runtime|Security Context|KubelethostPathVolume|KubeletManagedEtcHosts|Pods should (support remote command execution|support retrieving logs|contain environment variables|be updated)|Kubelet when scheduling|Container Lifecycle Hook|Probing container should (be restarted with a exec|\*not\* be restarted with a exec|be ready immediately)|Hostname|PrivilegedPod'

usage() { sed -n '15,19p' "${BASH_SOURCE[0]}" | cut -c3- >&2; exit 2; }

# passes — "NAME LABEL-FILTER FOCUS" per ginkgo pass of NC_PART (tab-separated).
passes() {
  local base='NodeConformance && !Flaky && !Alpha' focus=${NC_FOCUS:-}
  case ${NC_PART:-all} in
    all) printf 'parallel\t%s\t%s\nserial\t%s\t%s\n' "$base && !Serial" "$focus" "$base && Serial" "$focus" ;;
    ci) printf 'ci\t%s\t%s\n' "$base && !Serial && !Slow" "${focus:-$NC_CI_FOCUS}" ;;
    *) die "unknown NC_PART ${NC_PART} (all or ci)" ;;
  esac
}

# suite_args OUT LABELS FOCUS — the command of one pass: ginkgo's CLI running e2e_node.test in NC_PROCS
# processes (the first starts the services and kubelet; all drive specs), as Kubernetes' CI runs it.
suite_args() {
  local out=$1 skip
  skip=$(skip_regex "$SKIP_FILE")${NC_SKIP:+|$NC_SKIP}
  SUITE=("$TOOLS_BIN/ginkgo" run --procs "${NC_PROCS:-1}" --label-filter "$2" --no-color --timeout 3h
    --output-dir "$out" --junit-report junit.xml --json-report report.json)
  [[ -z $3 ]] || SUITE+=(--focus "$3")
  [[ -z $skip ]] || SUITE+=(--skip "$skip")
  # The suite finds kubelet beside itself (os.Args[0]): both are links in DIR/bin.
  SUITE+=("$DIR/bin/e2e_node.test" -- --node-name dockpin-node
    --container-runtime-endpoint "unix://$DIR/cri-dockerd.sock" --prepull-images=false
    --kubelet-config-file "$DIR/kubelet-base.yaml" --report-dir "$out"
    # Kubelet runs as a child (no systemd): the suite then asks for Docker's old cgroups, which this node
    # does not have; kubelet, the engine and the system stay in the cgroups they run in.
    --kubelet-flags "--runtime-cgroups= --kubelet-cgroups= --system-cgroups=")
  # shellcheck disable=SC2206 # NC_SUITE_ARGS: more flags for e2e_node.test, split on spaces
  SUITE+=(${NC_SUITE_ARGS:-})
}

install() {
  ensure_apt jq curl
  ensure_docker_cli
  KUBELET_BIN=$("$HACK_DIR/install-kubelet.sh" | tail -n1)
  "$HACK_DIR/install-e2e-node.sh" >/dev/null
  "$HACK_DIR/install-engine.sh" >/dev/null
  "$HACK_DIR/install-tools.sh" crictl ginkgo >/dev/null
  "$HACK_DIR/cni.sh" install
  "$HACK_DIR/critest.sh" serve
  mkdir -p "$DIR/bin"
  ln -sfn "$KUBELET_BIN" "$DIR/bin/kubelet"
  ln -sfn "$E2E_NODE_DIR/e2e_node.test" "$DIR/bin/e2e_node.test"
}

list() {
  install >/dev/null
  local name labels focus
  while IFS=$'\t' read -r name labels focus; do
    suite_args /tmp "$labels" "$focus"
    echo "# pass $name"
    SUITE=("${SUITE[0]}" run --dry-run -v "${SUITE[@]:2}")
    (cd /tmp && "${SUITE[@]}" 2>/dev/null) | grep -E '^\[[a-z]' | grep -v '^\[Synchronized' || true
  done < <(passes)
}

write_kubelet_config() {
  # The suite's own base (test/e2e_node/jenkins/default-kubelet-config.yaml) with what this node needs.
  cat >"$DIR/kubelet-base.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /
podCIDR: "10.100.0.0/24"
volumeStatsAggPeriod: 10s
fileCheckFrequency: 10s
evictionPressureTransitionPeriod: 30s
evictionHard:
  memory.available: 250Mi
  nodefs.available: 10%
  nodefs.inodesFree: 5%
evictionMinimumReclaim:
  nodefs.available: 5%
  nodefs.inodesFree: 5%
serializeImagePulls: false
protectKernelDefaults: true
failSwapOn: false
failCgroupV1: false
resolvConf: /etc/resolv.conf
EOF
}

# contain — inside the private mount namespace: /var, the sysctls, systemd-run.
contain() {
  local v=$DIR/var f
  mkdir -p "$v"/{lib/kubelet,log/pods,log/containers,cache,tmp}
  ln -sfn /run "$v/run"
  mount --rbind /var/cache "$v/cache" # the tool, engine and kubelet caches
  mount --rbind "$v" /var
  # Kubelet's root dir a shared mount point, as kubelet makes it (hack/kubelet.sh says why).
  mount --bind /var/lib/kubelet /var/lib/kubelet
  mount --make-rshared /var/lib/kubelet
  kubelet_sysctl_files "$DIR/sysctl"
  for f in "$DIR"/sysctl/*; do mount --bind "$f" "/proc/sys/$(basename "$f" | tr . /)"; done
  local sr
  if sr=$(command -v systemd-run); then mount --bind /dev/null "$sr"; fi
}

start_cri() {
  local bin=$1 extra=() h
  for h in "${REGISTRIES[@]}" "$CRITEST_REGISTRY"; do extra+=(--insecure-registry "$h"); done
  # The runtime handler the suite's RuntimeClass specs name (e2e_node's PreconfiguredRuntimeClassHandler;
  # containerd's and CRI-O's CI configure it the same way): runc under a second name.
  extra+=(--add-runtime test-handler=runc)
  DOCKERD_PROXY=http://$CRITEST_PROXY DOCKERD_EXTRA_ARGS="${extra[*]}" "$HACK_DIR/engine.sh" start >/dev/null
  DOCKER_HOST=unix://$STACK_DIR/docker.sock RECIPE=node-conformance CITOOL=$TOOLS_BIN/citool \
    AGNHOST=$E2E_NODE_DIR/agnhost NNP=$E2E_NODE_DIR/nnp REGISTRY_ADDR=$CRITEST_REGISTRY \
    REGISTRY_DIR=/tmp/dockpin-critest-registry "$HACK_DIR/critest/images.sh"
  CNI_DATA_DIR=$DIR/ipam "$HACK_DIR/cni.sh" clean "$DIR/net.d"
  CNI_DATA_DIR=$DIR/ipam "$HACK_DIR/cni.sh" config "$DIR/net.d"
  rm -rf "$DIR/root" "$DIR/cri-dockerd.sock"
  log "starting $bin on unix://$DIR/cri-dockerd.sock ($STORE store)"
  # shellcheck disable=SC2086 # NC_CRI_ARGS: extra flags, split on spaces
  spawn "$DIR/cri-dockerd.pid" "$DIR/cri-dockerd.log" "$bin" --container-runtime-endpoint "unix://$DIR/cri-dockerd.sock" \
    --cri-dockerd-root-directory "$DIR/root" --docker-endpoint "unix://$STACK_DIR/docker.sock" \
    --network-plugin cni --cni-bin-dir /usr/lib/cni --cni-conf-dir "$DIR/net.d" --cni-cache-dir "$DIR/cni-cache" \
    ${NC_CRI_ARGS:-}
  wait_for 30 "$TOOLS_BIN/crictl" --runtime-endpoint "unix://$DIR/cri-dockerd.sock" version >/dev/null ||
    { tail -n 20 "$DIR/cri-dockerd.log" >&2; die "$bin did not start"; }
}

# kubepods_cgroups — remove the QoS cgroups kubelet made (cgroupfs driver, cgroup root /; under each v1
# hierarchy, or the v2 one), deepest first.
kubepods_cgroups() {
  local d
  for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods; do
    [[ -d $d ]] || continue
    find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ ! -d $d ]] || log "WARNING: $d is still there"
  done
}

# summary REPORT — the suite's counts from its JSON report (Its only), then the names of the failed specs.
summary() {
  jq -r '[.[].SpecReports[]? | select(.LeafNodeType == "It") | .State] | group_by(.) |
    map("\(.[0]) \(length)") | join(", ")' "$1"
  jq -r '.[].SpecReports[]? | select(.LeafNodeType == "It" and (.State == "failed" or .State == "panicked" or .State == "timedout")) |
    "  FAILED: \((.ContainerHierarchyTexts // []) + [.LeafNodeText] | join(" "))"' "$1"
}

# inner — the run, inside the private mount namespace.
inner() {
  local bin=$1 rc=0 out name labels focus
  contain
  trap 'stop_pidfile "$DIR/cri-dockerd.pid" cri-dockerd; "$HACK_DIR/engine.sh" stop >/dev/null 2>&1 || true; kubepods_cgroups' EXIT
  write_kubelet_config
  start_cri "$bin"
  while IFS=$'\t' read -r name labels focus; do
    out=$NC_OUT/$NC_NAME-$STORE-$(date +%Y%m%d-%H%M%S)-$name
    echo "$out" >>"$NC_OUT/$NC_NAME-$STORE.runs"
    mkdir -p "$out"
    suite_args "$out" "$labels" "$focus"
    log "node conformance ($name pass, $STORE store, $NC_NAME: $bin): labels: $labels${focus:+; focus: $focus}; log: $out/suite.log"
    local prc=0
    (cd "$out" && timed "${SUITE[@]}") >"$out/suite.log" 2>&1 </dev/null || prc=$?
    cp "$DIR/cri-dockerd.log" "$out/" 2>/dev/null || true
    if [[ -f $out/report.json ]]; then
      log "pass $name: $(summary "$out/report.json")"
      jq -e '[.[].SpecReports[]? | select(.LeafNodeType == "It" and .State == "passed")] | length > 0' \
        "$out/report.json" >/dev/null || { log "ERROR: no spec passed in pass $name"; prc=1; }
      ginkgo_summary "$out/suite.log"
    else
      tail -n 40 "$out/suite.log" >&2
      ((prc)) || prc=1
    fi
    ((prc == 0)) || rc=1
  done < <(passes)
  # The suite stops kubelet with the last specs' pods still there (Kubernetes' CI drops the machine): they are
  # removed through the binary, whose teardown must then leave no address, veth or container behind.
  local left
  left=$("$TOOLS_BIN/crictl" --runtime-endpoint "unix://$DIR/cri-dockerd.sock" pods -q | wc -l)
  log "removing the $left pods the suite left, through the binary (crictl rmp -a -f)"
  "$TOOLS_BIN/crictl" --runtime-endpoint "unix://$DIR/cri-dockerd.sock" rmp -a -f >/dev/null || rc=1
  stop_pidfile "$DIR/cri-dockerd.pid" cri-dockerd
  pod_leaks "$DIR" "after the suite" || rc=1
  return "$rc"
}

run() {
  local bin=${CRI_DOCKERD_BIN:-$ROOT/_output/cri-dockerd}
  [[ -x $bin ]] || die "no $bin (run make build, or set CRI_DOCKERD_BIN)"
  bin=$(realpath "$bin")
  set_store
  hold_e2e_lock
  install
  mkdir -p "$DIR"
  rm -f "$NC_OUT/$NC_NAME-$STORE.runs"
  local rc=0
  unshare -m --propagation private "${BASH_SOURCE[0]}" inner "$bin" || rc=$?
  "$HACK_DIR/critest.sh" unserve
  CNI_DATA_DIR=$DIR/ipam "$HACK_DIR/cni.sh" teardown "$DIR/ipam" || rc=1
  return "$rc"
}

# states NAME STORE — "STATE<TAB>spec" for every spec the last run of NAME on STORE ran or skipped at run time
# (its passes together; specs the filters left out are not listed), sorted by spec.
states() {
  local runs=$NC_OUT/$1-$2.runs d
  [[ -f $runs ]] || return 0
  while read -r d; do
    [[ -f $d/report.json ]] || continue
    jq -r '.[].SpecReports[]? | select(.LeafNodeType == "It") | select(.State != "skipped" or .Failure != null) |
      "\(.State)\t\((.ContainerHierarchyTexts // []) + [.LeafNodeText] | join(" "))"' "$d/report.json"
  done <"$runs" | sort -t$'\t' -k2
}

# compare — the whole suite (NC_PART, default all) on CRI_DOCKERD_BIN, then on upstream cri-dockerd
# (hack/install-upstream.sh), for each store in E2E_STORES; then a table of passed / failed / skipped per
# binary per store, and the specs whose results differ, in NC_OUT/compare.md. Fails when ours fails a spec.
compare() {
  local store name rc=0 ours up upstream
  upstream=$("$HACK_DIR/install-upstream.sh" | tail -n1)
  for store in ${E2E_STORES:-classic containerd}; do
    STORE=$store NC_NAME=ours run || rc=1
    STORE=$store NC_NAME=upstream CRI_DOCKERD_BIN=$upstream run || log "upstream on the $store store: failures (compared below)"
  done
  {
    echo "| binary | store | passed | failed | skipped |"
    echo "|---|---|---|---|---|"
    for store in ${E2E_STORES:-classic containerd}; do
      for name in ours upstream; do
        states "$name" "$store" | cut -f1 | sort | uniq -c | awk -v n="$name" -v s="$store" '
          { c[$2] = $1 } END { printf "| %s | %s | %d | %d | %d |\n", n, s, c["passed"], c["failed"] + c["panicked"] + c["timedout"] + c["interrupted"], c["skipped"] }'
      done
    done
    for store in ${E2E_STORES:-classic containerd}; do
      ours=$(mktemp) up=$(mktemp)
      states ours "$store" >"$ours"
      states upstream "$store" >"$up"
      echo
      echo "Specs that ended differently on the $store store (ours, upstream, spec):"
      echo
      join -t$'\t' -1 2 -2 2 -o 1.1,2.1,0 <(sort -t$'\t' -k2 "$ours") <(sort -t$'\t' -k2 "$up") |
        awk -F'\t' '$1 != $2 { printf "- %s / %s: %s\n", $1, $2, $3 }'
      rm -f "$ours" "$up"
    done
  } >"$NC_OUT/compare.md"
  cat "$NC_OUT/compare.md"
  return "$rc"
}

stop() {
  local s
  hold_e2e_lock
  for s in classic containerd; do
    stop_pidfile "$NC_OUT/$s/cri-dockerd.pid" cri-dockerd
    [[ ! -d $NC_OUT/$s/stack ]] || STORE=$s STACK_DIR=$NC_OUT/$s/stack "$HACK_DIR/engine.sh" stop
  done
  kubepods_cgroups
  "$HACK_DIR/critest.sh" unserve
  "$HACK_DIR/cni.sh" teardown "$NC_OUT/classic/ipam" "$NC_OUT/containerd/ipam"
}

case ${1:-} in
  run | stop | list | compare) (($# == 1)) || usage; "$1" ;;
  inner) (($# == 2)) || usage; inner "$2" ;;
  *) usage ;;
esac
