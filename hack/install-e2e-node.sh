#!/usr/bin/env bash
# hack/install-e2e-node.sh — build (or reuse from the cache) Kubernetes' node e2e suite
# (k8s.io/kubernetes/test/e2e_node, the node conformance test) at KUBELET_VERSION into
# E2E_NODE_TEST_BIN, in a throwaway module (lib.sh k8s_module), as hack/install-kubelet.sh builds
# kubelet; beside it, the two test images' programs the suite's specs run, built from the same module
# (static): agnhost (test/images/agnhost, with its HTTPS key pair and kitten's and nautilus's pages) and
# nnp (test/images/nonewprivs). Prints E2E_NODE_TEST_BIN as its last line.
# Usage: hack/install-e2e-node.sh        (FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

: "${E2E_NODE_TEST_BIN:=$DOCKPIN_CACHE/e2e-node/$KUBELET_VERSION/e2e_node.test}"
DIR=$(dirname "$E2E_NODE_TEST_BIN")

# built FILE — FILE exists and was built from KUBELET_VERSION (its stamp file says so).
built() { [[ -x $1 ]] && [[ $(cat "$1.version" 2>/dev/null) == "$KUBELET_VERSION" ]]; }

cached() { built "$E2E_NODE_TEST_BIN" && built "$DIR/agnhost" && built "$DIR/nnp" && [[ -f $DIR/localhost.key && -d $DIR/nautilus ]]; }

build() {
  local work ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION"
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  cd "$work"
  k8s_module k8s.io/kubernetes/test/e2e_node
  mkdir -p "$DIR"
  if [[ -n ${FORCE:-} ]] || ! built "$E2E_NODE_TEST_BIN"; then
    timed go test -c -trimpath -ldflags "$ldflags" -o "$E2E_NODE_TEST_BIN.tmp" k8s.io/kubernetes/test/e2e_node
    mv "$E2E_NODE_TEST_BIN.tmp" "$E2E_NODE_TEST_BIN"
    echo "$KUBELET_VERSION" >"$E2E_NODE_TEST_BIN.version"
  fi
  local bin pkg src
  for bin in agnhost:agnhost nnp:nonewprivs; do
    pkg=k8s.io/kubernetes/test/images/${bin#*:} bin=$DIR/${bin%%:*}
    [[ -z ${FORCE:-} ]] && built "$bin" && continue
    CGO_ENABLED=0 timed go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" "$pkg"
    mv "$bin.tmp" "$bin"
    echo "$KUBELET_VERSION" >"$bin.version"
  done
  # agnhost's image holds the key pair its HTTPS servers use (test/images/agnhost/porter); kitten's and
  # nautilus's add their pages to it.
  src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images
  install -m 0644 "$src/agnhost/porter/localhost.crt" "$src/agnhost/porter/localhost.key" "$DIR/"
  install -d "$DIR/kitten" "$DIR/nautilus"
  install -m 0644 "$src"/kitten/html/* "$DIR/kitten/"
  install -m 0644 "$src"/nautilus/html/* "$DIR/nautilus/"
}

build_unless_cached "e2e_node.test $KUBELET_VERSION, agnhost and nnp" "about 15 minutes cold on 2 cores"
echo "$E2E_NODE_TEST_BIN"
