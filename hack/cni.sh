#!/usr/bin/env bash
# hack/cni.sh — pod networking for tests: Debian's CNI plugins and a machine-local bridge network.
# Usage: hack/cni.sh install                 install containernetworking-plugins (/usr/lib/cni) if missing
#        hack/cni.sh config DIR [DATA_DIR]   write DIR/10-dockpin-bridge.conflist
#        hack/cni.sh clean DIR [DATA_DIR]    remove that network's host-local state and the bridge
#        hack/cni.sh teardown [DATA_DIR...]  at the end of a run: remove its host-local state and, unless
#                                            another of our stacks uses it, the bridge; fails on leftovers
#        hack/cni.sh users                   the pids of our cri-dockerd processes using the network
# DATA_DIR is host-local's private state (default $CNI_DATA_DIR, else DIR/ipam).
# Env: CNI_DATA_DIR, CNI_BRIDGE (default dkpin0), CNI_SUBNET (default 10.88.0.0/16).
# The network "dockpin" is a bridge (gateway 10.88.0.1 on the host, hairpin on, no masquerade) plus
# portmap for hostPorts. Pods get no default route: they reach the host's bridge address and each
# other, nothing beyond this machine. The bridge plugin (isGateway) turns on IPv4 forwarding.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CNI_BRIDGE=${CNI_BRIDGE:-dkpin0}
CNI_SUBNET=${CNI_SUBNET:-10.88.0.0/16}
CONF_NAME=10-dockpin-bridge.conflist

usage() {
  echo "usage: $0 install | config DIR [DATA_DIR] | clean DIR [DATA_DIR] | teardown [DATA_DIR...] | users" >&2
  echo "  env: CNI_DATA_DIR CNI_BRIDGE CNI_SUBNET" >&2
  exit 2
}

install() {
  if [[ -x /usr/lib/cni/bridge ]]; then
    log "CNI plugins present in /usr/lib/cni"
    return
  fi
  ensure_apt containernetworking-plugins
  [[ -x /usr/lib/cni/bridge ]] || die "containernetworking-plugins installed but /usr/lib/cni/bridge is missing"
}

config() {
  local dir data
  dir=$(realpath -m "$1")
  data=$(realpath -m "${2:-${CNI_DATA_DIR:-$dir/ipam}}") # host-local needs an absolute path
  mkdir -p "$dir" "$data"
  # Written under a temporary name, then renamed: the shim reloads the directory when it
  # changes and must never read half a file (the .tmp extension keeps it out of the scan).
  cat >"$dir/.$CONF_NAME.tmp" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "dockpin",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$CNI_SUBNET"}]],
        "dataDir": "$data"
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
EOF
  mv -f "$dir/.$CONF_NAME.tmp" "$dir/$CONF_NAME"
  log "wrote $dir/$CONF_NAME (bridge $CNI_BRIDGE, subnet $CNI_SUBNET, host-local state in $data)"
}

clean() {
  local data
  data=$(realpath -m "${2:-${CNI_DATA_DIR:-$1/ipam}}")
  # host-local keeps one directory per network name under its dataDir.
  rm -rf "${data:?}/dockpin"
  if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
    log "deleting bridge $CNI_BRIDGE"
    ip link delete "$CNI_BRIDGE" type bridge
  fi
}

# users — the pids of the cri-dockerd processes running with this network: --network-plugin cni and a
# --cni-conf-dir that holds our config for CNI_BRIDGE (every stack of ours: e2e's shims, critest's).
users() {
  local f pid arg prev plugin confdir args
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/} && pid=${pid%/cmdline}
    { mapfile -d '' -t args <"$f"; } 2>/dev/null || continue # gone meanwhile
    [[ ${#args[@]} -gt 0 && ${args[0]##*/} == cri-dockerd ]] || continue
    plugin="" confdir=/etc/cni/net.d prev=""
    for arg in "${args[@]:1}"; do
      case $prev in
        --network-plugin) plugin=$arg ;;
        --cni-conf-dir) confdir=$arg ;;
      esac
      case $arg in
        --network-plugin=*) plugin=${arg#*=} ;;
        --cni-conf-dir=*) confdir=${arg#*=} ;;
      esac
      prev=$arg
    done
    [[ $confdir == /* ]] || confdir=/proc/$pid/cwd/$confdir
    [[ $plugin == cni ]] && grep -qs "\"bridge\": \"$CNI_BRIDGE\"" "$confdir/$CONF_NAME" && echo "$pid"
  done
  return 0
}

# teardown [DATA_DIR...] — what the end of a run that used the network does: removes the host-local state
# (DATA_DIR/dockpin) of each DATA_DIR it used, then the bridge, which takes its addresses and its routes to
# CNI_SUBNET with it. The bridge stays while another of our stacks uses it (users: a cri-dockerd of ours
# still runs with this network; the next pod's CNI ADD would make it again anyway). Fails, saying what is
# left, when a veth is still attached to the bridge (a pod left behind) or, once the bridge is gone, a route
# into CNI_SUBNET remains.
teardown() {
  local data pids veths routes
  for data in "$@"; do
    rm -rf "$(realpath -m "$data")/dockpin" # host-local keeps one directory per network name
  done
  if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
    pids=$(users)
    if [[ -n $pids ]]; then
      log "keeping bridge $CNI_BRIDGE: our cri-dockerd still uses it (pid $(echo "$pids" | paste -sd ' '))"
      return 0
    fi
    veths=$(ip -o link show master "$CNI_BRIDGE" 2>/dev/null | awk -F': ' '{ print $2 }' | paste -sd ' ')
    if [[ -n $veths ]]; then
      log "ERROR: bridge $CNI_BRIDGE left behind: pod interfaces still attached: $veths"
      return 1
    fi
    log "deleting bridge $CNI_BRIDGE"
    ip link delete "$CNI_BRIDGE" type bridge
  fi
  routes=$(ip -4 route show table all root "$CNI_SUBNET")
  if [[ -n $routes ]]; then
    log "ERROR: routes into $CNI_SUBNET left behind after the bridge $CNI_BRIDGE is gone:"
    printf '  %s\n' "$routes" >&2
    return 1
  fi
  log "bridge $CNI_BRIDGE and routes into $CNI_SUBNET: none left"
}

case ${1:-} in
  install) install ;;
  config) [[ $# -ge 2 && $# -le 3 ]] || usage; config "${@:2}" ;;
  clean) [[ $# -ge 2 && $# -le 3 ]] || usage; clean "${@:2}" ;;
  teardown) teardown "${@:2}" ;;
  users) (($# == 1)) || usage; users ;;
  *) usage ;;
esac
