#!/usr/bin/env bash
# hack/install-engine.sh — build (or reuse from the cache) dockerd, docker-proxy, containerd, ctr,
# containerd-shim-runc-v2 and runc into ENGINE_BIN (keyed by the three versions, see lib.sh).
# ENGINE=23..28 builds that Docker release's engine instead (the engine matrix): dockerd from
# github.com/docker/docker's source with its vendor.mod as go.mod, containerd 1.x from source (its
# go.mod has replace directives, which go install refuses); the module proxy's zips have no vendor/.
# Usage: hack/install-engine.sh        (FORCE=1 rebuilds; prints the bin dir as its last line)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ENGINE_BINARIES=(dockerd docker-proxy containerd ctr containerd-shim-runc-v2 runc)
STAMP=$ENGINE_BIN/.complete
WANT="moby=$MOBY_VERSION docker=$DOCKER_VERSION_STRING containerd=$CONTAINERD_VERSION runc=$RUNC_VERSION"
[[ $ENGINE == 29 ]] || WANT="docker=$LEGACY_DOCKER_VERSION containerd=$CONTAINERD_VERSION runc=$RUNC_VERSION"
SRC_DIR=$DOCKPIN_CACHE/engine-src

# module_of BINARY — "modulepath version" of the main module a Go binary was built from.
module_of() { go version -m "$1" | awk '$1 == "mod" { print $2, $3; exit }'; }

# verify — every binary exists, runs, and comes from the pinned module version.
verify() {
  [[ $ENGINE == 29 ]] || { verify_legacy; return; }
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

# verify_legacy — a matrix engine's binaries exist and say the pinned versions (they are built in a
# source tree, so go version -m names no module version).
verify_legacy() {
  local b out want flag
  for b in "${ENGINE_BINARIES[@]}"; do
    [[ -x $ENGINE_BIN/$b ]] || { log "missing $ENGINE_BIN/$b"; return 1; }
    flag=--version
    case $b in
      dockerd) want="Docker version $DOCKER_VERSION_STRING," ;;
      docker-proxy) continue ;; # it has no --version before Docker 28
      runc) want="runc version ${RUNC_VERSION#v}" ;;
      containerd-shim-runc-v2) want="Version:  $CONTAINERD_VERSION" flag=-v ;;
      *) want=" $CONTAINERD_VERSION" ;;
    esac
    out=$("$ENGINE_BIN/$b" "$flag" 2>&1) || { log "$b $flag fails: $out"; return 1; }
    [[ $out == *"$want"* ]] || { log "$b is not ${want# }: $out"; return 1; }
  done
}

# module_src MODULE VERSION — a fresh writable copy of MODULE@VERSION's source under SRC_DIR,
# without vendor/ (printed).
module_src() {
  local json from dir=$SRC_DIR/${1##*/}-${2%+incompatible}
  json=$(go mod download -json "$1@$2") || die "go mod download $1@$2: $(jq -r .Error <<<"$json" 2>/dev/null)"
  from=$(jq -r .Dir <<<"$json")
  rm -rf "$dir" && mkdir -p "$SRC_DIR" && cp -r "$from" "$dir" && chmod -R u+w "$dir" && rm -rf "$dir/vendor"
  echo "$dir"
}

# unservable_replace BUILD_OUTPUT — the go mod edit -replace argument for the first requirement the
# module proxy refused (403: a commit it cannot fetch, or a fork of a vendor's), with the nearest
# version of the required module: MOD@VERSION "(replaced by FORK@V)" goes back to MOD@VERSION, a
# pseudo-version to what the newest earlier patch of this Docker release pinned, else to the newest
# release before it. Fails when there is none.
unservable_replace() {
  local line mod ver release
  line=$(grep -oE '[^[:space:]:]+@v[^[:space:]:]+( \(replaced by [^)]*\))?: reading https://[^ ]* 403' <<<"$1" | head -n1)
  [[ -n $line ]] || return 1
  mod=${line%%@*} ver=${line#*@} ver=${ver%%[ :]*}
  if [[ $line == *"(replaced by "* ]]; then
    echo "-replace=$mod=$mod@$ver"
    return
  fi
  # The version an earlier patch of this Docker release pinned (an older commit of the same branch,
  # which that release built with), if the proxy serves it.
  local dv=${LEGACY_DOCKER_VERSION#v} p src pinned
  for ((p = ${dv##*.} - 1; p >= 0; p--)); do
    src=$(go mod download -json "github.com/docker/docker@v${dv%.*}.$p+incompatible" 2>/dev/null | jq -r '.Dir // empty') || continue
    pinned=$(awk -v m="$mod" '$1 == m { print $2; exit }' "$src/vendor.mod" 2>/dev/null)
    if [[ -n $pinned && $pinned != "$ver" ]] && go mod download "$mod@$pinned" 2>/dev/null; then
      echo "-replace=$mod@$ver=$mod@$pinned"
      return
    fi
  done
  # Else the newest release before the pseudo-version's base. The proxy's version lists are not
  # complete: releases are tried one by one, newest first.
  local base=${ver%%[-+]*} patch incompatible=""
  [[ $ver != *+incompatible ]] || incompatible=+incompatible
  [[ $base =~ ^(v[0-9]+\.[0-9]+\.)([0-9]+)$ ]] || return 1
  for ((patch = BASH_REMATCH[2] - 1; patch >= 0; patch--)); do
    release=${BASH_REMATCH[1]}$patch$incompatible
    if go mod download "$mod@$release" 2>/dev/null; then
      echo "-replace=$mod@$ver=$mod@$release"
      return
    fi
  done
  return 1
}

build_legacy_docker() {
  local dir v=github.com/docker/docker/dockerversion out replace tries=0
  rm -f "$ENGINE_BIN/replaced.tmp"
  dir=$(module_src github.com/docker/docker "$LEGACY_DOCKER_VERSION+incompatible")
  mv "$dir/vendor.mod" "$dir/go.mod" && mv "$dir/vendor.sum" "$dir/go.sum"
  # btrfs and devicemapper graph drivers need C headers; the matrix uses overlay2 only.
  local build=(go build -mod=mod -trimpath -tags "exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
    -ldflags "-s -w -X $v.Version=$DOCKER_VERSION_STRING -X $v.GitCommit=docker-$LEGACY_DOCKER_VERSION"
    -o "$ENGINE_BIN/" ./cmd/dockerd ./cmd/docker-proxy)
  until out=$(cd "$dir" && timed "${build[@]}" 2>&1); do
    # Some releases pin a requirement the module proxy does not serve: each is replaced by the
    # nearest version it serves (unservable_replace; logged, and in the table's notes), and the build
    # tried again.
    if ((++tries > 5)) || ! replace=$(cd "$dir" && unservable_replace "$out"); then
      grep -v '^go: downloading' <<<"$out" >&2
      return 1
    fi
    log "docker $LEGACY_DOCKER_VERSION: the module proxy does not serve a pinned requirement; using $replace"
    (cd "$dir" && go mod edit "$replace")
    echo "${replace#-replace=}" >>"$ENGINE_BIN/replaced.tmp"
  done
  grep -v '^go: downloading' <<<"$out" >&2 || true
  # What the build replaced, for the engine table (hack/engine-matrix.sh).
  if [[ -f $ENGINE_BIN/replaced.tmp ]]; then mv "$ENGINE_BIN/replaced.tmp" "$ENGINE_BIN/replaced"; else rm -f "$ENGINE_BIN/replaced"; fi
}

build_legacy_containerd() {
  local dir m=github.com/containerd/containerd
  dir=$(module_src "$m" "$CONTAINERD_VERSION")
  (cd "$dir" && timed go build -mod=mod -trimpath -tags no_btrfs -ldflags "-s -w -X $m/version.Version=$CONTAINERD_VERSION" \
    -o "$ENGINE_BIN/" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2)
}

build_legacy_runc() {
  local dir
  dir=$(module_src github.com/opencontainers/runc "$RUNC_VERSION")
  # runc 1.3.3 replaces go-selinux with a patched copy for CVE-2025-52881 in a nested module
  # (./internal/third_party/selinux), which module zips leave out; go-selinux v1.13.0 published the fix.
  if grep -q '=> ./internal/third_party/selinux' "$dir/go.mod"; then
    log "runc $RUNC_VERSION: its nested go-selinux is not in the module zip; using go-selinux v1.13.0"
    (cd "$dir" && go mod edit -dropreplace=github.com/opencontainers/selinux -require=github.com/opencontainers/selinux@v1.13.0)
    echo "go-selinux (runc's nested copy)=github.com/opencontainers/selinux@v1.13.0" >>"$ENGINE_BIN/replaced"
  fi
  (cd "$dir" && timed go build -mod=mod -trimpath -tags seccomp \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v} -X main.gitCommit=$RUNC_VERSION" -o "$ENGINE_BIN/runc" .)
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
  (($# == 0)) || { echo "usage: $0   (env: ENGINE=23..29 FORCE=1 DOCKPIN_CACHE ENGINE_BIN *_VERSION)" >&2; exit 2; }
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
    if [[ $ENGINE == 29 ]]; then
      build_moby
      build_containerd
      build_runc
    else
      build_legacy_docker
      build_legacy_containerd
      build_legacy_runc
    fi
    verify || die "engine build incomplete in $ENGINE_BIN"
    echo "$WANT" >"$STAMP"
  fi
  log "install-engine took $((SECONDS - t0))s"
  echo "$ENGINE_BIN"
}

main "$@"
