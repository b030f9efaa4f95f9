#!/usr/bin/env bash
# hack/node-e2e.sh — the node suite: kubelet itself (standalone, static pods, contained by hack/kubelet.sh)
# on our binary and the real engine, once per image store in E2E_STORES. Installs kubelet
# (hack/install-kubelet.sh, cached), then runs the e2e suite's TestNode... tests (E2E_NODE=1) through
# hack/e2e.sh, which installs the rest and leaves the host as it found it (CNI bridge, routes); each test
# fails if kubelet left a mount, a process, a veth or a leased IP (hack/kubelet.sh check-leaks).
# Usage: CRI_DOCKERD_BIN=_output/cri-dockerd E2E_STORES="classic containerd" [E2E_RUN=regexp] hack/node-e2e.sh
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBELET_BIN=$("$HACK_DIR/install-kubelet.sh" | tail -n1)
export KUBELET_BIN E2E_NODE=1
export E2E_RUN=${E2E_RUN:-^TestNode}
exec "$HACK_DIR/e2e.sh"
