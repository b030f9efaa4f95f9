#!/usr/bin/env bash
# hack/install-upstream.sh — build (or reuse from the cache) upstream cri-dockerd at its release
# UPSTREAM_VERSION (hack/lib.sh), fetched from the Go module proxy as a module (built and run, never
# copied), into UPSTREAM_CRI_DOCKERD_BIN: the other binary of the swap tests, the pin proxy's compare and
# the side-by-side benchmarks. The release has no vendor/, so it builds in module mode: about 5 minutes
# cold on 2 cores. Prints UPSTREAM_CRI_DOCKERD_BIN as its last line.
# Usage: hack/install-upstream.sh        (FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${UPSTREAM_CRI_DOCKERD_BIN:=$DOCKPIN_CACHE/upstream/$UPSTREAM_VERSION/cri-dockerd}"

# cached — the binary is there and reports the pinned release.
cached() {
  [[ -x $UPSTREAM_CRI_DOCKERD_BIN ]] && "$UPSTREAM_CRI_DOCKERD_BIN" --version 2>&1 | grep -qF "${UPSTREAM_VERSION#v}"
}

build() {
  local work commit
  ensure_apt jq
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  upstream_source "$work/cri-dockerd"
  commit=$(go mod download -json "github.com/Mirantis/cri-dockerd@$UPSTREAM_VERSION" | jq -r '.Origin.Hash // "unknown"')
  cd "$work/cri-dockerd"
  mkdir -p "$(dirname "$UPSTREAM_CRI_DOCKERD_BIN")"
  GOFLAGS="$GOFLAGS -mod=mod" timed go build -trimpath \
    -ldflags "-X github.com/Mirantis/cri-dockerd/cmd/version.Version=${UPSTREAM_VERSION#v} -X github.com/Mirantis/cri-dockerd/cmd/version.GitCommit=${commit:0:8}" \
    -o "$UPSTREAM_CRI_DOCKERD_BIN.tmp" .
  mv "$UPSTREAM_CRI_DOCKERD_BIN.tmp" "$UPSTREAM_CRI_DOCKERD_BIN"
}

build_unless_cached "upstream cri-dockerd $UPSTREAM_VERSION" "from the Go module proxy, about 5 minutes cold"
echo "$UPSTREAM_CRI_DOCKERD_BIN"
