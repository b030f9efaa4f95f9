# hack/lib.sh — shared helpers for the hack/ scripts. Source it, don't run it:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Gives log/die/wait_for/timed/spawn/stop_pidfile/ensure_apt, the pinned versions and
# the cache paths DOCKPIN_CACHE, ENGINE_BIN, TOOLS_BIN (all overridable from the environment).
# shellcheck shell=bash

# shellcheck disable=SC2034 # used by the scripts that source this file
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The engine: ENGINE=29 (the default) is Docker 29 from the moby v2 module; ENGINE=23 to 28 is the
# newest patch of that Docker release from github.com/docker/docker (+incompatible), with the
# containerd and runc its Dockerfile builds with (make engine-matrix).
: "${ENGINE:=29}"
# engine_row N — "docker containerd runc" versions of the matrix's engine N (23 to 28).
engine_row() {
  case $1 in
    23) echo v23.0.18 v1.6.38 v1.1.12 ;;
    24) echo v24.0.9 v1.7.13 v1.1.12 ;;
    25) echo v25.0.14 v1.7.27 v1.2.5 ;; # 25.0.15 is not in the checksum database; 25.0.16 and .17 need Mirantis' buildkit fork
    26) echo v26.1.5 v1.7.18 v1.1.12 ;;
    27) echo v27.5.1 v1.7.25 v1.2.4 ;;
    28) echo v28.5.2 v1.7.28 v1.3.3 ;;
    *) return 1 ;;
  esac
}
ENGINE_MATRIX=(23 24 25 26 27 28 29)
if [[ $ENGINE != 29 ]]; then
  row=$(engine_row "$ENGINE") || { echo "ENGINE must be one of ${ENGINE_MATRIX[*]}, not '$ENGINE'" >&2; exit 2; }
  read -r LEGACY_DOCKER_VERSION CONTAINERD_VERSION RUNC_VERSION <<<"$row"
  DOCKER_VERSION_STRING=${LEGACY_DOCKER_VERSION#v}
  : "${ENGINE_BIN:=${DOCKPIN_CACHE:-/var/cache/dockpin}/engine/docker-${LEGACY_DOCKER_VERSION}_containerd-${CONTAINERD_VERSION}_runc-${RUNC_VERSION}/bin}"
  unset row
fi
export ENGINE

# Pinned versions (go list -m -versions <module> lists the alternatives).
: "${MOBY_VERSION:=v2.0.0-beta.24}"        # github.com/moby/moby/v2
: "${DOCKER_VERSION_STRING:=29.8.1}"       # what that dockerd reports as ServerVersion
: "${CONTAINERD_VERSION:=v2.4.2}"          # github.com/containerd/containerd/v2
: "${RUNC_VERSION:=v1.5.3}"                # github.com/opencontainers/runc
: "${CRICTL_VERSION:=v1.37.0}"             # sigs.k8s.io/cri-tools
: "${REGISTRY_VERSION:=v3.1.2}"            # github.com/distribution/distribution/v3
: "${GOLANGCI_LINT_VERSION:=v2.15.0}"      # github.com/golangci/golangci-lint/v2
: "${GOVULNCHECK_VERSION:=v1.9.0}"         # golang.org/x/vuln
: "${KUBELET_VERSION:=v1.37.2}"           # k8s.io/kubernetes (the node e2e suite's kubelet)
: "${DOCKER_CLI_VERSION:=v28.5.2+incompatible}" # github.com/docker/cli (only where the machine has no docker CLI)
: "${UPSTREAM_VERSION:=v0.4.3}"          # github.com/Mirantis/cri-dockerd (upstream's latest release, commit d969e29f)
: "${GINKGO_VERSION:=v2.32.0}" # github.com/onsi/ginkgo/v2: its CLI runs the node conformance suite (k8s.io/kubernetes v1.37.2's)
: "${CHECKPOINTCTL_VERSION:=v1.6.0}" # github.com/checkpoint-restore/checkpointctl (v1.7.0 needs go-criu v8.5.0, which the proxy refuses)
: "${CRIU_VERSION:=4.1.1}"               # criu, from Debian's source (bookworm-backports' release): hack/install-criu.sh
: "${CRIU_SHA256:=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe}" # its criu_4.1.1.orig.tar.xz
: "${VULNDB_VERSION:=v0.0.0-20261105234957-e22db6528018}" # golang.org/x/vulndb (OSV data and cmd/indexdb)

: "${DOCKPIN_CACHE:=/var/cache/dockpin}"
: "${ENGINE_BIN:=$DOCKPIN_CACHE/engine/moby-${MOBY_VERSION}_containerd-${CONTAINERD_VERSION}_runc-${RUNC_VERSION}/bin}"
: "${TOOLS_BIN:=$DOCKPIN_CACHE/tools/bin}"
: "${KUBELET_BIN:=$DOCKPIN_CACHE/kubelet/$KUBELET_VERSION/kubelet}"
: "${CRIU_BIN:=$DOCKPIN_CACHE/criu/$CRIU_VERSION/bin}"
export DOCKPIN_CACHE ENGINE_BIN TOOLS_BIN KUBELET_BIN CRIU_BIN

export GOFLAGS=-modcacherw GOTOOLCHAIN=local
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  PATH=/usr/local/go/bin:$PATH
fi

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# timed CMD... — run CMD and log how long it took.
timed() {
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  log "took $((SECONDS - t0))s (rc=$rc): $*"
  return "$rc"
}

# wait_for SECONDS CMD... — retry CMD (quietly) every 0.2 s until it succeeds or time runs out.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# spawn PIDFILE LOGFILE CMD... — start CMD detached in its own session; its pid goes to PIDFILE
# (written by the process itself before exec, so it is right whether or not setsid forks).
# PIDFILE "" means CMD writes its own.
spawn() {
  local pidfile=$1 logfile=$2
  shift 2
  # shellcheck disable=SC2016 # $$ and $@ are for the inner shell
  if [[ -n ${DOCKPIN_E2E_LOCK_FD:-} ]]; then
    setsid bash -c '[[ -z $1 ]] || echo $$ >"$1"; shift; exec "$@"' spawn "$pidfile" "$@" \
      >>"$logfile" 2>&1 </dev/null {DOCKPIN_E2E_LOCK_FD}>&- &
  else
    setsid bash -c '[[ -z $1 ]] || echo $$ >"$1"; shift; exec "$@"' spawn "$pidfile" "$@" \
      >>"$logfile" 2>&1 </dev/null &
  fi
}

# hold_e2e_lock — take /tmp/dockpin-e2e.lock (DOCKPIN_E2E_LOCK) for the rest of the calling script: the
# scripts that use the one test engine stack and CNI bridge (e2e, node-e2e, critest) run one at a time.
# Waits, saying so, while another run holds it; a no-op when an ancestor holds it already (`flock LOCK make
# e2e`, patches-check.sh) or this process took it before. Daemons started with spawn do not keep it.
hold_e2e_lock() {
  local lock=${DOCKPIN_E2E_LOCK:-/tmp/dockpin-e2e.lock}
  [[ -z ${DOCKPIN_E2E_LOCK_FD:-} ]] || return 0
  exec {DOCKPIN_E2E_LOCK_FD}>>"$lock"
  if ! flock -n "$DOCKPIN_E2E_LOCK_FD"; then
    if lock_held_by_ancestor "$lock"; then
      exec {DOCKPIN_E2E_LOCK_FD}>&-
      unset DOCKPIN_E2E_LOCK_FD
      return 0
    fi
    log "waiting for $lock: another e2e, node-e2e or critest run uses the test engine"
    flock "$DOCKPIN_E2E_LOCK_FD"
  fi
  export DOCKPIN_E2E_LOCK_FD
}

# lock_held_by_ancestor FILE — a flock on FILE (as /proc/locks shows it) is held by this process or one of its
# ancestors.
lock_held_by_ancestor() {
  local inode holders pid
  inode=$(stat -c %i "$1") || return 1
  holders=$(awk -v ino="$inode" '$2 == "FLOCK" { n = split($6, f, ":"); if (f[n] == ino) print $5 }' /proc/locks)
  [[ -n $holders ]] || return 1
  pid=$$
  while ((pid > 1)); do
    grep -qx "$pid" <<<"$holders" && return 0
    pid=$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null) || return 1
  done
  return 1
}

# pid_gone PID — the process has exited (a zombie waiting to be reaped counts as gone).
pid_gone() { ! kill -0 "$1" 2>/dev/null || [[ $(ps -o stat= -p "$1") == Z* ]]; }

# pid_alive PIDFILE — true if PIDFILE names a running process.
pid_alive() {
  local pid
  [[ -f $1 ]] && pid=$(<"$1") && [[ $pid =~ ^[0-9]+$ ]] && ! pid_gone "$pid"
}

# stop_pidfile PIDFILE NAME [SECONDS] — TERM the process, wait, then KILL; removes PIDFILE.
stop_pidfile() {
  local pidfile=$1 name=$2 secs=${3:-30} pid
  if pid_alive "$pidfile"; then
    pid=$(<"$pidfile")
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for "$secs" pid_gone "$pid"; then
      log "$name (pid $pid) still running after ${secs}s, sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_for 10 pid_gone "$pid" || die "$name (pid $pid) does not die"
    fi
  fi
  rm -f "$pidfile"
}

# skip_regex FILE — the regexes of a skip file ("REGEX  # reason" lines; blank and comment lines allowed)
# joined with |, for ginkgo's skip; dies on an entry without a reason.
skip_regex() {
  local file=${1:?usage: skip_regex FILE} line n=0 regexes=()
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
    [[ $line =~ ^[[:space:]]*(.*[^[:space:]])[[:space:]]+#[[:space:]]*[^[:space:]] ]] ||
      die "$file:$n: want 'REGEX  # reason', got: $line"
    regexes+=("${BASH_REMATCH[1]}")
  done <"$file"
  local IFS='|'
  echo "${regexes[*]}"
}

# pod_leaks DIR WHEN — after a suite on STACK_DIR's engine whose pods used the bridge network with its
# host-local state in DIR/ipam: no pod IP still leased, no veth left on the bridge, no sandbox container
# left in the engine. Prints what it finds (WHEN: "after critest"); fails on any leak.
pod_leaks() {
  local dir=$1 ips veths pods
  ips=$(find "$dir/ipam/dockpin" -maxdepth 1 -name '[0-9]*.[0-9]*' 2>/dev/null | wc -l)
  veths=$(ip -o link show master "${CNI_BRIDGE:-dkpin0}" 2>/dev/null | wc -l)
  pods=$(docker -H "unix://${STACK_DIR:?}/docker.sock" ps -aq --filter label=io.kubernetes.docker.type=podsandbox | wc -l)
  log "$2: $ips pod IPs leased, $veths veths on the bridge, $pods sandbox containers left"
  ((ips + veths + pods == 0))
}

# kubelet_sysctl_files DIR — one file per sysctl kubelet sets (pkg/kubelet/cm: setupKernelTunables),
# named as its /proc/sys path with dots, holding the value kubelet wants: bind-mounted over /proc/sys in a
# private mount namespace, they let kubelet run with protectKernelDefaults without writing the host's.
kubelet_sysctl_files() {
  local s name
  mkdir -p "$1"
  for s in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
    kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    name=${s%%=*}
    echo "${s#*=}" >"$1/${name//\//.}"
  done
}

# ginkgo_summary LOG — a ginkgo suite's own summary from its log: the failures, if any, then "Ran N of M
# Specs" and the counts.
ginkgo_summary() {
  awk '/^Summarizing [0-9]+ Failure/ || /^Ran [0-9]+ of [0-9]+ Specs/ {p = 1} p && !/^(--- |FAIL$|PASS$)/' "$1"
}

# build_unless_cached WHAT HOW — for the install-*.sh scripts, which define cached() (the built thing is
# there and reports its pinned version) and build(): builds WHAT (HOW: where from, how long) in a subshell
# unless it is cached and FORCE is unset, then fails unless cached() holds.
build_unless_cached() {
  if [[ -z ${FORCE:-} ]] && cached; then
    log "$1 cached"
    return
  fi
  log "building $1 ($2)"
  (build)
  cached || die "the built $1 does not pass the cache check (it does not run or report its pinned version)"
}

# ensure_apt PKG... — apt-get install the packages that are not installed yet.
ensure_apt() {
  local missing=() p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "apt: installing ${missing[*]}"
  if [[ -z ${DOCKPIN_APT_UPDATED:-} ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DOCKPIN_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# Packages the test stack needs on the host.
# shellcheck disable=SC2034
STACK_APT_PACKAGES=(libseccomp-dev pkg-config gcc libc6-dev jq curl socat iproute2 containernetworking-plugins)

# upstream_source DEST — upstream cri-dockerd's source at UPSTREAM_VERSION, fetched as a Go module
# (`go mod download`: the module proxy serves upstream's releases, and the module cache keeps it) and
# copied, writable, into DEST (made anew). It is built and run, never copied into this repository.
upstream_source() {
  local dest=$1 dir
  dir=$(go mod download -json "github.com/Mirantis/cri-dockerd@$UPSTREAM_VERSION" | jq -r '.Dir // empty') ||
    die "go mod download github.com/Mirantis/cri-dockerd@$UPSTREAM_VERSION failed"
  [[ -d $dir ]] || die "no source directory for github.com/Mirantis/cri-dockerd@$UPSTREAM_VERSION"
  rm -rf "$dest"
  mkdir -p "$dest"
  cp -R "$dir/." "$dest/"
  chmod -R u+w "$dest"
}

# ensure_docker_cli — the docker CLI on PATH, which the e2e suite, critest's image setup and the demo
# drive the engine with: the machine's own, else one built (cached) by install-tools.sh into TOOLS_BIN,
# which is then put first on PATH (exported: the e2e tests run it too).
ensure_docker_cli() {
  command -v docker >/dev/null 2>&1 && return 0
  "$HACK_DIR/install-tools.sh" docker >/dev/null
  export PATH=$TOOLS_BIN:$PATH
}

# k8s_module PKG — make the current (empty) directory a throwaway Go module that builds PKG of
# k8s.io/kubernetes KUBELET_VERSION. k8s.io/kubernetes cannot be built as a module as it is: its go.mod
# replaces every staging module (k8s.io/api, k8s.io/client-go, ...) with a ./staging path that a module
# download does not carry, so each is replaced with its published twin, v0.<minor>.<patch>.
k8s_module() {
  local pkg=${1:?usage: k8s_module PKG} twin mods mod
  twin=v0.${KUBELET_VERSION#v1.}
  printf 'module dockpin.test/k8sbuild\n\ngo %s\n' "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >tools.go
  export GOFLAGS="${GOFLAGS:-} -mod=mod"
  go mod download -json "k8s.io/kubernetes@$KUBELET_VERSION" >/dev/null
  mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBELET_VERSION.mod
  mods=$(awk '$2 == "=>" && $3 ~ /^\.\/staging/ { print $1 }' "$mod")
  [[ -n $mods ]] || die "no staging replacements found in $mod"
  {
    echo "require k8s.io/kubernetes $KUBELET_VERSION"
    echo "replace ("
    for m in $mods; do echo "  $m => $m $twin"; done
    echo ")"
  } >>go.mod
  go mod tidy >/dev/null
}
