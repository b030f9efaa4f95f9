#!/usr/bin/env bash
# hack/patches-check.sh — the patch series in patches/ against unmodified upstream cri-dockerd at its
# release UPSTREAM_VERSION (hack/lib.sh), fetched from the Go module proxy as a module: copies that source
# into _output/upstream-patched (so that the series' `replace
# github.com/dockpin/cri-dockerd => ../..` names this checkout), commits it as the base, applies the
# series with `git am`, builds the patched binary (module mode), runs upstream's own unit tests of the
# packages the series touches, then the pinning e2e tests against the patched binary on the real engine
# (hack/e2e.sh holds the shared e2e lock). Prints how long each step took.
# Usage: hack/patches-check.sh
#   UPSTREAM_VERSION  upstream's release the series targets (default in hack/lib.sh)
#   PATCHES_E2E_RUN   the e2e tests to run (default: the pinning tests that go through the CRI only)
#   E2E_STORES        image stores (default: classic containerd)
#   PATCHES_E2E=0     skip the e2e part
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."
root=$PWD

tree=$root/_output/upstream-patched
bin=$root/_output/cri-dockerd-upstream-patched
# The pinning tests that go through CRI and crictl only (no feature of our binary alone).
e2e_run=${PATCHES_E2E_RUN:-'^(TestPinnedImagesCrictl|TestPinsFileReloadOnSIGHUP|TestContainerdLabelPinsLive|TestPreloadedImagesPinned)$'}
ensure_apt jq git
compgen -G "patches/*.patch" >/dev/null || die "no patches/*.patch"
start=$SECONDS

apply() {
  upstream_source "$tree"
  local git=(git -C "$tree" -c user.name=patches-check -c user.email=patches-check@invalid -c commit.gpgsign=false)
  "${git[@]}" init -q
  "${git[@]}" add -A
  GIT_AUTHOR_DATE=2026-04-28T00:00:00Z GIT_COMMITTER_DATE=2026-04-28T00:00:00Z \
    "${git[@]}" commit -q -m "upstream cri-dockerd $UPSTREAM_VERSION"
  "${git[@]}" am -q --keep-cr "$root"/patches/*.patch
  "${git[@]}" log --oneline >&2
}

build() {
  (cd "$tree" && GOFLAGS="-mod=mod -modcacherw" go build -trimpath \
    -ldflags "-X github.com/Mirantis/cri-dockerd/cmd/version.Version=${UPSTREAM_VERSION#v}-pinning" -o "$bin" .)
  "$bin" --version
}

unit() {
  (cd "$tree" && GOFLAGS="-mod=mod -modcacherw" go test -count=1 ./cmd/... ./core/)
}

# e2e runs the pinning tests against the patched binary (hack/e2e.sh holds the shared engine's lock, saying
# when it waits for it).
e2e() {
  E2E_RUN=$e2e_run E2E_STORES=${E2E_STORES:-classic containerd} CRI_DOCKERD_BIN=$bin hack/e2e.sh
}

log "patches-check: applying patches/ to upstream cri-dockerd $UPSTREAM_VERSION"
timed apply
log "patches-check: building the patched binary (module mode; about 5 min with a cold module cache)"
timed build
log "patches-check: upstream's unit tests of the packages the series touches"
timed unit
if [[ ${PATCHES_E2E:-1} != 0 ]]; then
  log "patches-check: pinning e2e against the patched binary (under /tmp/dockpin-e2e.lock)"
  timed e2e
fi
log "patches-check: passed in $((SECONDS - start))s"
