#!/usr/bin/env bash
# hack/install-kubelet.sh — build (or reuse from the cache) kubelet KUBELET_VERSION (lib.sh) into
# KUBELET_BIN, for the node e2e suite, in a throwaway module (lib.sh k8s_module).
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
  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  cd "$work"
  k8s_module k8s.io/kubernetes/cmd/kubelet
  mkdir -p "$(dirname "$KUBELET_BIN")"
  timed go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION" \
    -o "$KUBELET_BIN.tmp" k8s.io/kubernetes/cmd/kubelet
  mv "$KUBELET_BIN.tmp" "$KUBELET_BIN"
}

build_unless_cached "kubelet $KUBELET_VERSION" "about 9 minutes cold"
echo "$KUBELET_BIN"
