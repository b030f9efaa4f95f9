#!/usr/bin/env bash
# hack/kubelet.sh — run kubelet standalone (static pods from a manifest directory, no API server) against
# a CRI socket, contained so that it leaves the host as it found it:
# it runs under `unshare -m --propagation slave` whose first step bind-mounts a private directory over
# /var and files holding kubelet's wanted values over the /proc/sys entries it would write
# (protectKernelDefaults: true makes it check them instead). Its root dir, pod log dir and volume plugin
# dir are private paths outside /var, the same in both namespaces: the engine, in the host's namespace,
# bind-mounts files from them into containers and our binary writes the pods' logs there.
# Its HTTP API listens on 127.0.0.1 only (anonymous, AlwaysAllow) on a free port.
#
# Usage: KUBELET_DIR=DIR CRI_ENDPOINT=unix:///path/cri.sock hack/kubelet.sh start
#          prints the HTTPS port (last line); DIR/manifests is the static pod path
#        KUBELET_DIR=DIR hack/kubelet.sh stop         TERM kubelet (by PID), wait; KILL its children
#        KUBELET_DIR=DIR [CNI_DATA_DIR=D] hack/kubelet.sh check-leaks
#          fails if a mount under DIR, the kubelet process or a child of it, a veth on CNI_BRIDGE
#          (default dkpin0) or an IP leased in CNI_DATA_DIR/dockpin is left
# Env: KUBELET_BIN (default: the cache, hack/install-kubelet.sh), KUBELET_PORT (default: a free one),
#      KUBELET_NODE_NAME (default dockpin-node), KUBELET_CONFIG_EXTRA (YAML lines appended to the
#      KubeletConfiguration), KUBELET_EXTRA_ARGS (more flags, split on spaces).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  echo "usage: KUBELET_DIR=DIR [CRI_ENDPOINT=unix://...] $0 start|stop|check-leaks" >&2
  exit 2
}

: "${KUBELET_DIR:?set KUBELET_DIR to the private directory of kubelet}"
KUBELET_DIR=$(realpath -m "$KUBELET_DIR")
PIDFILE=$KUBELET_DIR/kubelet.pid
CHILDREN=$KUBELET_DIR/kubelet.children
CNI_BRIDGE=${CNI_BRIDGE:-dkpin0}

port_free() { [[ -z $(ss -Htln "sport = :$1") ]]; }

free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 20000))
    port_free "$p" && { echo "$p"; return; }
  done
  die "no free port found"
}

write_config() {
  local port=$1
  cat >"$KUBELET_DIR/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $KUBELET_DIR/manifests
fileCheckFrequency: 1s
syncFrequency: 10s
address: 127.0.0.1
port: $port
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: $CRI_ENDPOINT
imageServiceEndpoint: $CRI_ENDPOINT
podLogsDir: $KUBELET_DIR/pod-logs
volumePluginDir: $KUBELET_DIR/volume-plugins
protectKernelDefaults: true
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
cgroupDriver: cgroupfs
resolvConf: /etc/resolv.conf
${KUBELET_CONFIG_EXTRA:-}
EOF
}

# contained CMD... — the body run inside the new mount namespace, then exec CMD (kubelet keeps the pid).
# shellcheck disable=SC2016 # expanded by the inner shell
# The kubelet binary may live under /var (the cache): it is bind-mounted to DIR/kubelet.bin first.
CONTAINED='set -e
dir=$1 bin=$2; shift 2
touch "$dir/kubelet.bin"
mount --bind "$bin" "$dir/kubelet.bin"
mount --bind "$dir/var" /var
# The root dir made a shared mount point here, as kubelet would make it at start: kubelet then skips its own
# bind mount, which races with its pod-resources socket (a temporary file made before the mount and renamed
# after it fails with EXDEV, and kubelet exits).
mount --bind "$dir/root" "$dir/root"
mount --make-rshared "$dir/root"
for f in "$dir"/sysctl/*; do
  mount --bind "$f" "/proc/sys/$(basename "$f" | tr . /)"
done
exec "$dir/kubelet.bin" "$@"'

start() {
  : "${CRI_ENDPOINT:?set CRI_ENDPOINT to the CRI socket (unix://...)}"
  [[ -x $KUBELET_BIN ]] || die "no kubelet at $KUBELET_BIN (run hack/install-kubelet.sh)"
  if pid_alive "$PIDFILE"; then die "kubelet already runs (pid $(<"$PIDFILE"))"; fi
  local port=${KUBELET_PORT:-} extra
  [[ -n $port ]] || port=$(free_port)
  port_free "$port" || die "port $port is in use"
  mkdir -p "$KUBELET_DIR"/{manifests,var,root,pod-logs,volume-plugins}
  kubelet_sysctl_files "$KUBELET_DIR/sysctl"
  write_config "$port"
  read -ra extra <<<"${KUBELET_EXTRA_ARGS:-}"
  log "starting kubelet $("$KUBELET_BIN" --version | awk '{print $2}') on 127.0.0.1:$port (CRI $CRI_ENDPOINT, dir $KUBELET_DIR)"
  spawn "$PIDFILE" "$KUBELET_DIR/kubelet.log" unshare -m --propagation slave \
    bash -c "$CONTAINED" contained "$KUBELET_DIR" "$KUBELET_BIN" \
    --config "$KUBELET_DIR/config.yaml" --root-dir "$KUBELET_DIR/root" \
    --hostname-override "${KUBELET_NODE_NAME:-dockpin-node}" --v 2 "${extra[@]}"
  wait_for 10 test -s "$PIDFILE" || die "kubelet did not start"
  if ! wait_for 60 up "$port" || ! pid_alive "$PIDFILE"; then
    tail -n 40 "$KUBELET_DIR/kubelet.log" >&2
    stop
    die "kubelet did not answer on 127.0.0.1:$port"
  fi
  echo "$port" >"$KUBELET_DIR/port"
  echo "$port"
}

# up PORT — kubelet answers on PORT, or has exited (the caller checks which).
up() {
  pid_alive "$PIDFILE" || { log "kubelet exited"; return 0; }
  curl -ksf "https://127.0.0.1:$1/healthz"
}

# children PID — the direct children of PID.
children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' || true; }

stop() {
  local pid c
  if pid_alive "$PIDFILE"; then
    pid=$(<"$PIDFILE")
    children "$pid" >"$CHILDREN"
    log "stopping kubelet (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_for 30 pid_gone "$pid"; then
      log "kubelet (pid $pid) still running after 30s, sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_for 10 pid_gone "$pid" || die "kubelet (pid $pid) does not die"
    fi
    # A zombie leader may still have threads holding the listener: wait until the port is free.
    if [[ -f $KUBELET_DIR/port ]]; then
      wait_for 30 port_free "$(<"$KUBELET_DIR/port")" || die "kubelet's port $(<"$KUBELET_DIR/port") is still in use"
    fi
    # Children it left (reparented, so matched by the pid and start time they had under kubelet).
    while read -r c; do
      [[ -n $c ]] || continue
      kill -KILL "$c" 2>/dev/null && log "killed kubelet's child $c"
    done <"$CHILDREN"
  fi
  rm -f "$PIDFILE"
}

check_leaks() {
  local leaks=() mounts veths ips pid
  mounts=$(awk -v d="$KUBELET_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo)
  [[ -z $mounts ]] || leaks+=("mounts: $(echo "$mounts" | paste -sd ' ')")
  if pid_alive "$PIDFILE"; then leaks+=("kubelet pid $(<"$PIDFILE")"); fi
  if [[ -f $CHILDREN ]]; then
    while read -r pid; do
      [[ -n $pid ]] && ! pid_gone "$pid" && leaks+=("kubelet child pid $pid")
    done <"$CHILDREN"
  fi
  veths=$(ip -o link show master "$CNI_BRIDGE" 2>/dev/null | awk -F': ' '{ print $2 }' | paste -sd ' ')
  [[ -z $veths ]] || leaks+=("veths on $CNI_BRIDGE: $veths")
  if [[ -n ${CNI_DATA_DIR:-} && -d $CNI_DATA_DIR/dockpin ]]; then
    ips=$(find "$CNI_DATA_DIR/dockpin" -maxdepth 1 -name '*.*.*.*' -printf '%f ')
    [[ -z $ips ]] || leaks+=("leased IPs: $ips")
  fi
  if ((${#leaks[@]})); then
    log "ERROR: kubelet left: ${leaks[*]}"
    return 1
  fi
  log "kubelet left nothing behind"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  check-leaks) check_leaks ;;
  *) usage ;;
esac
