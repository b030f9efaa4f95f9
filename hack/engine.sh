#!/usr/bin/env bash
# hack/engine.sh — run one private Docker Engine stack (containerd + dockerd) under STACK_DIR.
# Usage: hack/engine.sh start|stop|start-dockerd|stop-dockerd|start-containerd|stop-containerd|status|env
# dockerd runs with --live-restore, as on many nodes: containers outlive a dockerd restart
# (the chaos test restarts dockerd and containerd under running pods).
# Env: STORE=containerd|classic (image store, default containerd), STACK_DIR (default
#      /tmp/dockpin-stack-$STORE), ENGINE_BIN, DOCKERD_EXTRA_ARGS, DOCKERD_PROXY (http://host:port),
#      DOCKERD_BRIDGE=NAME:CIDR (e.g. dkpind0:10.89.0.1/24: a machine-local bridge this script makes
#      for Docker's default network, with no NAT and no route out; default: no default network).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STORE=${STORE:-containerd}
STACK_DIR=${STACK_DIR:-/tmp/dockpin-stack-$STORE}
CTRD_SOCK=$STACK_DIR/containerd.sock
DOCKER_SOCK=$STACK_DIR/docker.sock
CTRD_PID=$STACK_DIR/containerd.pid
DOCKERD_PID=$STACK_DIR/dockerd.pid
LOGS=$STACK_DIR/logs
SNAPSHOTTER_TYPE=io.containerd.snapshotter.v1

usage() {
  echo "usage: $0 start|stop|start-dockerd|stop-dockerd|start-containerd|stop-containerd|status|env" >&2
  echo "  env: STORE=containerd|classic STACK_DIR ENGINE_BIN DOCKERD_EXTRA_ARGS DOCKERD_PROXY" >&2
  exit 2
}

containerd_up() { "$ENGINE_BIN/ctr" -a "$CTRD_SOCK" version >/dev/null 2>&1; }
dockerd_up() { curl -fsS --unix-socket "$DOCKER_SOCK" http://d/_ping >/dev/null 2>&1; }
api() { curl -fsS --unix-socket "$DOCKER_SOCK" "http://d/$1"; }

# daemon_env — env(1) arguments for containerd and dockerd: no inherited proxy settings, our
# binaries (and the runc wrapper, if this host needs it) first in PATH; shims and runc inherit
# containerd's env, and dockerd runs `runc features` from its own PATH.
daemon_env() {
  local path=$ENGINE_BIN:$PATH
  # runc runs criu from its PATH for checkpoints (hack/install-criu.sh; Debian 12's fails here).
  [[ -x $CRIU_BIN/criu ]] && path=$CRIU_BIN:$path
  if ! sh -c 'echo -1 > /proc/self/oom_score_adj' 2>/dev/null; then
    path=$HACK_DIR/runc-oom-wrapper:$path
  fi
  printf '%s\n' -u HTTP_PROXY -u HTTPS_PROXY -u NO_PROXY -u http_proxy -u https_proxy -u no_proxy \
    "PATH=$path" "REAL_RUNC=$ENGINE_BIN/runc"
}

write_containerd_config() {
  mkdir -p "$STACK_DIR"/containerd/{root,state} "$LOGS"
  # CRI and NRI are off: this containerd only serves dockerd, and NRI's socket is host-global.
  local version=3 # containerd 2's config; the matrix's containerd 1.6 and 1.7 read version 2
  [[ $CONTAINERD_VERSION == v1.* ]] && version=2
  cat >"$STACK_DIR/containerd/config.toml" <<EOF
version = $version
root = "$STACK_DIR/containerd/root"
state = "$STACK_DIR/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
EOF
}

write_daemon_json() {
  # CDI is on, with a private spec directory (the e2e CDI tests write their specs there). A matrix
  # engine gets only what it knows (dockerd refuses an unknown key): the containerd image store
  # came in Docker 24, CDI's spec directories in 25. Experimental features are on: the engine's
  # checkpoints (CheckpointContainer) need them.
  mkdir -p "$STACK_DIR"/{data,exec,cdi} "$LOGS"
  jq -n --arg store "$STORE" --argjson engine "$ENGINE" --arg cdi "$STACK_DIR/cdi" '{features: {}, experimental: true}
    | if $engine >= 24 then .features["containerd-snapshotter"] = ($store == "containerd") else . end
    | if $engine >= 25 then .features.cdi = true | .["cdi-spec-dirs"] = [$cdi] else . end
    | if $store == "classic" then .["storage-driver"] = "overlay2" else . end' >"$STACK_DIR/daemon.json"
}

start_containerd() {
  if containerd_up; then return; fi
  local envargs
  mapfile -t envargs < <(daemon_env)
  if ! pid_alive "$CTRD_PID"; then
    log "starting containerd on $CTRD_SOCK"
    write_containerd_config
    spawn "$CTRD_PID" "$LOGS/containerd.log" env "${envargs[@]}" \
      "$ENGINE_BIN/containerd" --config "$STACK_DIR/containerd/config.toml"
  fi
  wait_for 30 containerd_up || { tail -n 20 "$LOGS/containerd.log" >&2; die "containerd did not come up"; }
}

start_dockerd() {
  containerd_up || die "containerd is not running on $CTRD_SOCK (use: $0 start)"
  if ! dockerd_up; then
    local envargs extra
    mapfile -t envargs < <(daemon_env)
    read -ra extra <<<"${DOCKERD_EXTRA_ARGS:-}"
    if [[ -n ${DOCKERD_PROXY:-} ]]; then
      envargs+=("HTTP_PROXY=$DOCKERD_PROXY" "HTTPS_PROXY=$DOCKERD_PROXY")
    fi
    if ! pid_alive "$DOCKERD_PID"; then
      log "starting dockerd ($STORE store) on $DOCKER_SOCK"
      write_daemon_json
      spawn "" "$LOGS/dockerd.log" env "${envargs[@]}" "$ENGINE_BIN/dockerd" \
        --config-file "$STACK_DIR/daemon.json" --containerd "$CTRD_SOCK" \
        --data-root "$STACK_DIR/data" --exec-root "$STACK_DIR/exec" \
        -H "unix://$DOCKER_SOCK" --pidfile "$DOCKERD_PID" \
        "--bridge=$(default_bridge)" --iptables=false --ip6tables=false --ip-masq=false \
        --insecure-registry 127.0.0.1:5000 --live-restore "${extra[@]}"
    fi
    wait_for 60 dockerd_up || { tail -n 30 "$LOGS/dockerd.log" >&2; die "dockerd did not come up"; }
  fi
  verify_version
  verify_store
}

# verify_version — fail loudly unless the dockerd answering is the one ENGINE_BIN holds (one left
# running in STACK_DIR by another engine of the matrix would be tested in its place).
verify_version() {
  local running
  running=$(api version | jq -r .Version)
  [[ $running == "$DOCKER_VERSION_STRING" ]] ||
    die "dockerd in $STACK_DIR is Docker $running, not $DOCKER_VERSION_STRING (ENGINE=$ENGINE): stop it first ($0 stop)"
}

# verify_store — fail loudly unless dockerd really uses the image store STORE asks for.
verify_store() {
  local info check
  info=$(api info)
  # shellcheck disable=SC2016 # $t is a jq variable
  case $STORE in
    containerd) check='any(.DriverStatus[]?; . == ["driver-type", $t])' ;;
    classic) check='.Driver == "overlay2" and (any(.DriverStatus[]?; . == ["driver-type", $t]) | not)' ;;
  esac
  jq -e --arg t "$SNAPSHOTTER_TYPE" "$check" <<<"$info" >/dev/null ||
    die "dockerd in $STACK_DIR does not use the $STORE image store: $(jq -c '{Driver, DriverStatus}' <<<"$info")"
}

stop_dockerd() { stop_pidfile "$DOCKERD_PID" dockerd 60; }

# default_bridge — the --bridge value: "none", or the DOCKERD_BRIDGE bridge, made (and given its
# address) when missing. Docker uses its address as the gateway and its subnet for containers.
default_bridge() {
  [[ -n ${DOCKERD_BRIDGE:-} ]] || { echo none; return; }
  local name=${DOCKERD_BRIDGE%%:*} cidr=${DOCKERD_BRIDGE#*:}
  if ! ip link show "$name" >/dev/null 2>&1; then
    ip link add "$name" type bridge && ip addr add "$cidr" dev "$name" && ip link set "$name" up
    echo "$name" >"$STACK_DIR/bridge" # stop_all deletes what we made
  fi
  echo "$name"
}

# shim_pids — containerd shims serving THIS stack's containerd (matched on its socket path).
shim_pids() {
  ps -eo pid=,comm=,args= | awk -v sock="$CTRD_SOCK" '$2 ~ /^containerd-shim/ {
    for (i = 3; i < NF; i++) if ($i == "-address" && $(i + 1) == sock) { print $1; break } }'
}

stop_all() {
  stop_dockerd
  stop_pidfile "$CTRD_PID" containerd 30
  if [[ -f $STACK_DIR/bridge ]]; then
    ip link delete "$(cat "$STACK_DIR/bridge")" type bridge 2>/dev/null || true
    rm -f "$STACK_DIR/bridge"
  fi
  local pid
  for pid in $(shim_pids); do
    log "killing leftover shim $pid and its containers"
    pkill -KILL -P "$pid" || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Mounts left behind by killed containers, deepest first.
  awk -v d="$STACK_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

status() {
  local version info
  version=$(api version) || die "dockerd is not answering on $DOCKER_SOCK"
  info=$(api info)
  jq -cn --argjson v "$version" --argjson i "$info" \
    '{ServerVersion: $i.ServerVersion, ApiVersion: $v.ApiVersion, Driver: $i.Driver, DriverStatus: $i.DriverStatus}'
}

print_env() {
  printf 'export %s=%q\n' DOCKER_HOST "unix://$DOCKER_SOCK" CONTAINERD_ADDRESS "$CTRD_SOCK" \
    CONTAINERD_NAMESPACE moby STACK_DIR "$STACK_DIR" ENGINE_BIN "$ENGINE_BIN" STORE "$STORE"
}

main() {
  (($# == 1)) || usage
  case $STORE in containerd | classic) ;; *) die "STORE must be containerd or classic, not '$STORE'" ;; esac
  case $1 in
    start)
      [[ -x $ENGINE_BIN/dockerd ]] || die "no engine in $ENGINE_BIN (run hack/install-engine.sh)"
      [[ $STORE == classic || $ENGINE -ge 24 ]] ||
        die "Docker $DOCKER_VERSION_STRING has no containerd image store (it came in Docker 24): use STORE=classic"
      start_containerd
      start_dockerd
      status
      ;;
    start-dockerd) start_dockerd ;;
    stop-dockerd) stop_dockerd ;;
    start-containerd) start_containerd ;;
    stop-containerd) stop_pidfile "$CTRD_PID" containerd 30 ;;
    stop) stop_all ;;
    status) status ;;
    env) print_env ;;
    *) usage ;;
  esac
}

main "$@"
