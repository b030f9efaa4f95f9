#!/usr/bin/env bash
# hack/cni.sh — pod networking for tests: Debian's CNI plugins and a machine-local bridge network.
# Usage: hack/cni.sh install                 install containernetworking-plugins (/usr/lib/cni) if missing
#        hack/cni.sh config DIR [DATA_DIR]   write DIR/10-dockpin-bridge.conflist
#        hack/cni.sh clean DIR [DATA_DIR]    remove that network's host-local state and the bridge
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
  echo "usage: $0 install | config DIR [DATA_DIR] | clean DIR [DATA_DIR]   (env: CNI_DATA_DIR CNI_BRIDGE CNI_SUBNET)" >&2
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

case ${1:-} in
  install) install ;;
  config) [[ $# -ge 2 && $# -le 3 ]] || usage; config "${@:2}" ;;
  clean) [[ $# -ge 2 && $# -le 3 ]] || usage; clean "${@:2}" ;;
  *) usage ;;
esac
