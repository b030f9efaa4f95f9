#!/usr/bin/env bash
# hack/install-upstream.sh — build (or reuse from the cache) upstream cri-dockerd at UPSTREAM_COMMIT from
# its source snapshot (../shared/upstream, a test fixture: built and run, never copied) into
# UPSTREAM_CRI_DOCKERD_BIN, for the e2e swap tests (our binary and upstream's on the same root and CNI dirs).
# The snapshot has no vendor/, so it builds in module mode from the module proxy: about 5 minutes cold on
# 2 cores. Prints UPSTREAM_CRI_DOCKERD_BIN as its last line.
# Usage: hack/install-upstream.sh        (FORCE=1 rebuilds; UPSTREAM_TARBALL overrides the snapshot)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${UPSTREAM_COMMIT:=246bd657}"
: "${UPSTREAM_TARBALL:=$HACK_DIR/../../shared/upstream/cri-dockerd-$UPSTREAM_COMMIT.tar.gz}"
: "${UPSTREAM_CRI_DOCKERD_BIN:=$DOCKPIN_CACHE/upstream/$UPSTREAM_COMMIT/cri-dockerd}"
# What the snapshot's `git describe` says (its README); the binary reports it through its ldflags.
: "${UPSTREAM_VERSION:=v0.4.1-20}"

# cached — the binary is there and runs --version.
cached() {
  [[ -x $UPSTREAM_CRI_DOCKERD_BIN ]] && "$UPSTREAM_CRI_DOCKERD_BIN" --version >/dev/null 2>&1
}

build() {
  local work
  [[ -f $UPSTREAM_TARBALL ]] || die "no upstream snapshot at $UPSTREAM_TARBALL"
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  tar -xzf "$UPSTREAM_TARBALL" -C "$work"
  cd "$work/cri-dockerd"
  mkdir -p "$(dirname "$UPSTREAM_CRI_DOCKERD_BIN")"
  GOFLAGS="$GOFLAGS -mod=mod" timed go build -trimpath \
    -ldflags "-X github.com/Mirantis/cri-dockerd/cmd/version.Version=$UPSTREAM_VERSION -X github.com/Mirantis/cri-dockerd/cmd/version.GitCommit=$UPSTREAM_COMMIT" \
    -o "$UPSTREAM_CRI_DOCKERD_BIN.tmp" .
  mv "$UPSTREAM_CRI_DOCKERD_BIN.tmp" "$UPSTREAM_CRI_DOCKERD_BIN"
}

if [[ -z ${FORCE:-} ]] && cached; then
  log "upstream cri-dockerd $UPSTREAM_COMMIT cached"
else
  log "building upstream cri-dockerd $UPSTREAM_COMMIT (about 5 minutes cold)"
  (build)
  cached || die "the built upstream cri-dockerd does not run --version"
fi
echo "$UPSTREAM_CRI_DOCKERD_BIN"
