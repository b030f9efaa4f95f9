#!/usr/bin/env bash
# hack/registry.sh — a local distribution registry (deletes enabled) for push/pull tests.
# Usage: hack/registry.sh start|stop
# Env: REGISTRY_ADDR (default 127.0.0.1:5000), REGISTRY_DIR (default /tmp/dockpin-registry), TOOLS_BIN.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REGISTRY_ADDR=${REGISTRY_ADDR:-127.0.0.1:5000}
REGISTRY_DIR=${REGISTRY_DIR:-/tmp/dockpin-registry}
PIDFILE=$REGISTRY_DIR/registry.pid

usage() { echo "usage: $0 start|stop   (env: REGISTRY_ADDR REGISTRY_DIR TOOLS_BIN)" >&2; exit 2; }
registry_up() { curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }

start() {
  [[ -x $TOOLS_BIN/registry ]] || die "no $TOOLS_BIN/registry (run hack/install-tools.sh registry)"
  mkdir -p "$REGISTRY_DIR/data"
  if ! pid_alive "$PIDFILE"; then
    registry_up && die "something else already answers on $REGISTRY_ADDR"
    cat >"$REGISTRY_DIR/config.yml" <<EOF
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $REGISTRY_DIR/data}
  delete: {enabled: true}
http:
  addr: $REGISTRY_ADDR
  secret: dockpin-local-test-registry
EOF
    log "starting registry on $REGISTRY_ADDR"
    # OTEL_TRACES_EXPORTER=none: the registry must not try to export traces anywhere.
    spawn "$PIDFILE" "$REGISTRY_DIR/registry.log" env OTEL_TRACES_EXPORTER=none \
      "$TOOLS_BIN/registry" serve "$REGISTRY_DIR/config.yml"
  fi
  wait_for 30 registry_up || { tail -n 20 "$REGISTRY_DIR/registry.log" >&2; die "registry did not come up"; }
  log "registry up at http://$REGISTRY_ADDR/v2/"
}

main() {
  (($# == 1)) || usage
  case $1 in
    start) start ;;
    stop) stop_pidfile "$PIDFILE" registry 10 ;;
    *) usage ;;
  esac
}

main "$@"
