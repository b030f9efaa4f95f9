#!/usr/bin/env bash
# hack/install-kubelet.sh — build (or reuse from the cache) kubelet KUBELET_VERSION (lib.sh) into
# KUBELET_BIN, for the node e2e suite. k8s.io/kubernetes cannot be built as a module as it is: its
# go.mod replaces every staging module (k8s.io/api, k8s.io/client-go, ...) with a ./staging path that
# a module download does not carry. So a throwaway module requires k8s.io/kubernetes and replaces each
# staging module with its published twin, v0.<minor>.<patch> for v1.<minor>.<patch>.
# About 9 minutes on 2 cores with a cold module cache. Prints KUBELET_BIN as its last line.
# Usage: hack/install-kubelet.sh        (FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# cached — KUBELET_BIN runs and reports KUBELET_VERSION.
cached() {
  [[ -x $KUBELET_BIN ]] && [[ $("$KUBELET_BIN" --version 2>/dev/null) == "Kubernetes $KUBELET_VERSION" ]]
}

build() {
  local work twin mods mod
  twin=v0.${KUBELET_VERSION#v1.}
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  cd "$work"
  printf 'module dockpin.test/kubeletbuild\n\ngo %s\n' "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kubelet"\n' >tools.go
  export GOFLAGS="$GOFLAGS -mod=mod"
  go mod download -json "k8s.io/kubernetes@$KUBELET_VERSION" >/dev/null
  mod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBELET_VERSION.mod
  mods=$(awk '$2 == "=>" && $3 ~ /^\.\/staging/ { print $1 }' "$mod")
  [[ -n $mods ]] || die "no staging replacements found in $mod"
  {
    echo "require k8s.io/kubernetes $KUBELET_VERSION"
    echo "replace ("
    for m in $mods; do echo "  $m => $m $twin"; done
    echo ")"
  } >>go.mod
  go mod tidy >/dev/null
  mkdir -p "$(dirname "$KUBELET_BIN")"
  timed go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION" \
    -o "$KUBELET_BIN.tmp" k8s.io/kubernetes/cmd/kubelet
  mv "$KUBELET_BIN.tmp" "$KUBELET_BIN"
}

if [[ -z ${FORCE:-} ]] && cached; then
  log "kubelet $KUBELET_VERSION cached"
else
  log "building kubelet $KUBELET_VERSION (about 9 minutes cold)"
  (build)
  cached || die "the built kubelet does not report $KUBELET_VERSION"
fi
echo "$KUBELET_BIN"
