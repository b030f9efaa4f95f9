#!/usr/bin/env bash
# hack/install-engine.sh — build (or reuse from the cache) dockerd, docker-proxy, containerd, ctr,
# containerd-shim-runc-v2 and runc into ENGINE_BIN (keyed by the three versions, see lib.sh).
# Usage: hack/install-engine.sh        (FORCE=1 rebuilds; prints the bin dir as its last line)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ENGINE_BINARIES=(dockerd docker-proxy containerd ctr containerd-shim-runc-v2 runc)
STAMP=$ENGINE_BIN/.complete
WANT="moby=$MOBY_VERSION docker=$DOCKER_VERSION_STRING containerd=$CONTAINERD_VERSION runc=$RUNC_VERSION"

# module_of BINARY — "modulepath version" of the main module a Go binary was built from.
module_of() { go version -m "$1" | awk '$1 == "mod" { print $2, $3; exit }'; }

# verify — every binary exists, runs, and comes from the pinned module version.
verify() {
  local b want
  for b in "${ENGINE_BINARIES[@]}"; do
    [[ -x $ENGINE_BIN/$b ]] || { log "missing $ENGINE_BIN/$b"; return 1; }
    case $b in
      dockerd | docker-proxy) want="github.com/moby/moby/v2 $MOBY_VERSION" ;;
      runc) want="github.com/opencontainers/runc $RUNC_VERSION" ;;
      *) want="github.com/containerd/containerd/v2 $CONTAINERD_VERSION" ;;
    esac
    [[ $(module_of "$ENGINE_BIN/$b") == "$want" ]] || { log "$b is not $want"; return 1; }
    "$ENGINE_BIN/$b" --version >/dev/null 2>&1 || { log "$b --version fails"; return 1; }
  done
}

build_moby() {
  local v=github.com/moby/moby/v2/dockerversion
  GOBIN=$ENGINE_BIN timed go install -trimpath \
    -ldflags "-s -w -X $v.Version=$DOCKER_VERSION_STRING -X $v.GitCommit=moby-v2-${MOBY_VERSION#v}" \
    "github.com/moby/moby/v2/cmd/dockerd@$MOBY_VERSION" "github.com/moby/moby/v2/cmd/docker-proxy@$MOBY_VERSION"
}

build_containerd() {
  local m=github.com/containerd/containerd/v2
  GOBIN=$ENGINE_BIN timed go install -trimpath -ldflags "-s -w -X $m/version.Version=${CONTAINERD_VERSION#v}" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/ctr@$CONTAINERD_VERSION" \
    "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

build_runc() { # -tags seccomp needs libseccomp-dev: Docker's default profile is seccomp.
  GOBIN=$ENGINE_BIN timed go install -trimpath -tags seccomp -ldflags "-s -w" \
    "github.com/opencontainers/runc@$RUNC_VERSION"
}

main() {
  (($# == 0)) || { echo "usage: $0   (env: FORCE=1 DOCKPIN_CACHE ENGINE_BIN *_VERSION)" >&2; exit 2; }
  local t0=$SECONDS
  ensure_apt "${STACK_APT_PACKAGES[@]}"
  if [[ -z ${FORCE:-} && -f $STAMP ]]; then
    log "engine cached in $ENGINE_BIN ($(<"$STAMP"))"
  elif [[ -z ${FORCE:-} ]] && verify; then
    log "engine binaries present and verified, stamping $STAMP"
    echo "$WANT" >"$STAMP"
  else
    log "building engine: $WANT"
    rm -f "$STAMP"
    mkdir -p "$ENGINE_BIN"
    build_moby
    build_containerd
    build_runc
    verify || die "engine build incomplete in $ENGINE_BIN"
    echo "$WANT" >"$STAMP"
  fi
  log "install-engine took $((SECONDS - t0))s"
  echo "$ENGINE_BIN"
}

main "$@"
