#!/usr/bin/env bash
# hack/install-e2e-node.sh — build (or reuse from the cache) Kubernetes' node e2e suite
# (k8s.io/kubernetes/test/e2e_node, the node conformance test) at KUBELET_VERSION into
# E2E_NODE_TEST_BIN, in a throwaway module (lib.sh k8s_module), as hack/install-kubelet.sh builds
# kubelet. Prints E2E_NODE_TEST_BIN as its last line.
# Usage: hack/install-e2e-node.sh        (FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${E2E_NODE_TEST_BIN:=$DOCKPIN_CACHE/e2e-node/$KUBELET_VERSION/e2e_node.test}"

# cached — the binary exists and was built from KUBELET_VERSION (its stamp file says so).
cached() {
  [[ -x $E2E_NODE_TEST_BIN ]] && [[ $(cat "$E2E_NODE_TEST_BIN.version" 2>/dev/null) == "$KUBELET_VERSION" ]]
}

build() {
  local work
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  cd "$work"
  k8s_module k8s.io/kubernetes/test/e2e_node
  mkdir -p "$(dirname "$E2E_NODE_TEST_BIN")"
  timed go test -c -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION" \
    -o "$E2E_NODE_TEST_BIN.tmp" k8s.io/kubernetes/test/e2e_node
  mv "$E2E_NODE_TEST_BIN.tmp" "$E2E_NODE_TEST_BIN"
  echo "$KUBELET_VERSION" >"$E2E_NODE_TEST_BIN.version"
}

build_unless_cached "e2e_node.test $KUBELET_VERSION" "about 15 minutes cold on 2 cores"
echo "$E2E_NODE_TEST_BIN"
