#!/usr/bin/env bash
# hack/demo.sh — the quick start: uses the machine's Docker Engine when it answers with API >= 1.42,
# else builds (cached) and starts a private one; starts our cri-dockerd on a private socket with a few
# pins and shows `crictl images -o json`. Usage: hack/demo.sh start|stop (make demo / make demo-stop).
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEMO_DIR=${DEMO_DIR:-/tmp/dockpin-demo}
CRI_SOCK=$DEMO_DIR/cri-dockerd.sock
CRI_PID=$DEMO_DIR/cri-dockerd.pid
SYSTEM_DOCKER=${SYSTEM_DOCKER:-unix:///var/run/docker.sock}

usage() { echo "usage: $0 start|stop" >&2; exit 2; }

# system_engine_ok — the machine's own engine answers with API >= 1.42.
system_engine_ok() {
  local v
  v=$(curl -fsS --max-time 3 --unix-socket "${SYSTEM_DOCKER#unix://}" http://d/version 2>/dev/null | jq -r .ApiVersion) || return 1
  [[ -n $v && $v != null ]] && printf '%s\n1.42\n' "$v" | sort -V -C -r
}

engine_host() {
  if [[ -f $DEMO_DIR/engine ]]; then cat "$DEMO_DIR/engine"; return; fi
  if system_engine_ok; then
    log "using the machine's Docker Engine at $SYSTEM_DOCKER"
    echo "$SYSTEM_DOCKER" | tee "$DEMO_DIR/engine"
    return
  fi
  log "no usable Docker Engine at $SYSTEM_DOCKER: building (cached) and starting a private one"
  "$HACK_DIR/install-engine.sh" >/dev/null
  STORE=containerd STACK_DIR=$DEMO_DIR/engine-stack "$HACK_DIR/engine.sh" start >&2
  echo "unix://$DEMO_DIR/engine-stack/docker.sock" | tee "$DEMO_DIR/engine"
}

# demo_image TAG [LABEL...] — a tiny offline image (docker import), made once.
demo_image() {
  local tag=$1 args=() l root
  shift
  docker -H "$HOST" image inspect "$tag" >/dev/null 2>&1 && return
  for l in "$@"; do args+=(-c "LABEL $l"); done
  root=$(mktemp -d)
  echo "$tag" >"$root/image-name"
  tar -C "$root" -c . | docker -H "$HOST" import "${args[@]}" - "$tag" >/dev/null
  rm -rf "$root"
  log "made demo image $tag${*:+ ($*)}"
}

# DEMO_PINS_WAIT is how long the demo waits for the pins to be known (s).
DEMO_PINS_WAIT=${DEMO_PINS_WAIT:-120}

# wait_pins CRICTL... — wait until ListImages answers: it refuses (Unavailable) while a pin source
# cannot tell yet, e.g. the preload archive present at start is still being read. Says why it waits;
# gives up after DEMO_PINS_WAIT seconds with the last answer and the daemon's log.
wait_pins() {
  local deadline=$((SECONDS + DEMO_PINS_WAIT)) err said=""
  while ! err=$("$@" images -q 2>&1 >/dev/null); do
    if ((SECONDS >= deadline)); then
      tail -n 20 "$DEMO_DIR/cri-dockerd.log" >&2
      die "the pins were not known after ${DEMO_PINS_WAIT}s; ListImages still answers: $err"
    fi
    if [[ -z $said ]]; then
      log "waiting for the pins to be known (ListImages: ${err##*desc = })"
      said=1
    fi
    sleep 0.2
  done
}

start() {
  : "${CRI_DOCKERD_BIN:?set CRI_DOCKERD_BIN (make demo does)}"
  ensure_apt jq curl
  ensure_docker_cli
  mkdir -p "$DEMO_DIR"
  local crictl_dir
  crictl_dir=$("$HACK_DIR/install-tools.sh" crictl | tail -n1)
  HOST=$(engine_host)
  demo_image registry.k8s.io/pause:3.10
  demo_image dockpin-demo/labelled:1 io.cri-containerd.pinned=pinned
  demo_image dockpin-demo/by-pattern:1
  demo_image dockpin-demo/by-file:1
  demo_image dockpin-demo/team-infra:1 team=infra
  demo_image dockpin-demo/not-pinned:1
  echo "dockpin-demo/by-file:1   # pins file, re-read when it changes and on SIGHUP" >"$DEMO_DIR/pins"
  mkdir -p "$DEMO_DIR/pins.d"
  demo_image dockpin-demo/by-dir:1
  echo "dockpin-demo/by-dir:1   # a file of the pins directory" >"$DEMO_DIR/pins.d/10-demo"
  mkdir -p "$DEMO_DIR/preload"
  if [[ ! -f $DEMO_DIR/preload/demo.tar ]]; then # an air-gap archive, loaded and pinned at start-up
    demo_image dockpin-demo/preloaded:1
    docker -H "$HOST" save -o "$DEMO_DIR/preload/demo.tar" dockpin-demo/preloaded:1
    docker -H "$HOST" rmi dockpin-demo/preloaded:1 >/dev/null
  fi
  stop_pidfile "$CRI_PID" cri-dockerd
  log "starting cri-dockerd on unix://$CRI_SOCK"
  spawn "$CRI_PID" "$DEMO_DIR/cri-dockerd.log" "$CRI_DOCKERD_BIN" \
    --container-runtime-endpoint "unix://$CRI_SOCK" --docker-endpoint "$HOST" \
    --cri-dockerd-root-directory "$DEMO_DIR/root" --network-plugin "" \
    --pinned-images 'dockpin-demo/by-pattern*' --pinned-image-labels team=infra \
    --pinned-images-file "$DEMO_DIR/pins" --pinned-images-dir "$DEMO_DIR/pins.d" \
    --preload-images-dir "$DEMO_DIR/preload"
  printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n' "$CRI_SOCK" "$CRI_SOCK" >"$DEMO_DIR/crictl.yaml"
  local crictl=("$crictl_dir/crictl" --config "$DEMO_DIR/crictl.yaml")
  wait_for 30 "${crictl[@]}" version || { tail -n 20 "$DEMO_DIR/cri-dockerd.log" >&2; die "cri-dockerd did not start"; }
  wait_pins "${crictl[@]}"
  # The archive's pins are known once its manifest is read; ImageStatus waits (bounded) for its load.
  "${crictl[@]}" inspecti dockpin-demo/preloaded:1 >/dev/null || log "the preload archive is not loaded yet (see $DEMO_DIR/cri-dockerd.log)"
  echo "\$ crictl images -o json"
  "${crictl[@]}" images -o json
  echo
  echo "pinned images:"
  "${crictl[@]}" images -o json | jq -r '.images[] | select(.pinned) | "  \(.repoTags | join(", "))"'
  cat <<MSG

cri-dockerd is serving on unix://$CRI_SOCK (log: $DEMO_DIR/cri-dockerd.log)
  why is an image pinned:  ${crictl[*]} inspecti -o json dockpin-demo/labelled:1
  pinning state:           ${crictl[*]} info
  pin one more:            echo dockpin-demo/not-pinned:1 >>$DEMO_DIR/pins.d/10-demo   (applies at once, no signal)
Stop everything the demo started: make demo-stop
MSG
}

stop() {
  stop_pidfile "$CRI_PID" cri-dockerd
  if [[ -d $DEMO_DIR/engine-stack ]]; then
    STORE=containerd STACK_DIR=$DEMO_DIR/engine-stack "$HACK_DIR/engine.sh" stop
  fi
  rm -f "$DEMO_DIR/engine"
  log "demo stopped"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
