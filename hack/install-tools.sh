#!/usr/bin/env bash
# hack/install-tools.sh — build (or reuse) crictl, registry, golangci-lint, govulncheck and indexdb
# (golang.org/x/vulndb's builder of an offline vulnerability database) into TOOLS_BIN.
# A tool is reused only if `go version -m` shows it was built from the pinned module version,
# so bumping a *_VERSION in lib.sh rebuilds it. Prints TOOLS_BIN as its last line.
# Usage: hack/install-tools.sh [crictl|registry|golangci-lint|govulncheck|indexdb|all]...
#        (default all; FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { echo "usage: $0 [crictl|registry|golangci-lint|govulncheck|indexdb|all]..." >&2; exit 2; }

# package_of TOOL — "module package-path version" to go install for TOOL.
package_of() {
  case $1 in
    crictl) echo "sigs.k8s.io/cri-tools sigs.k8s.io/cri-tools/cmd/crictl $CRICTL_VERSION" ;;
    registry) echo "github.com/distribution/distribution/v3 github.com/distribution/distribution/v3/cmd/registry $REGISTRY_VERSION" ;;
    golangci-lint) echo "github.com/golangci/golangci-lint/v2 github.com/golangci/golangci-lint/v2/cmd/golangci-lint $GOLANGCI_LINT_VERSION" ;;
    govulncheck) echo "golang.org/x/vuln golang.org/x/vuln/cmd/govulncheck $GOVULNCHECK_VERSION" ;;
    indexdb) echo "golang.org/x/vulndb golang.org/x/vulndb/cmd/indexdb $VULNDB_VERSION" ;;
    *) usage ;;
  esac
}

# install_tool TOOL — go install TOOL unless the binary already comes from the pinned version.
install_tool() {
  local tool=$1 mod pkg version have=""
  read -r mod pkg version <<<"$(package_of "$tool")"
  if [[ -x $TOOLS_BIN/$tool ]]; then
    have=$(go version -m "$TOOLS_BIN/$tool" | awk '$1 == "mod" { print $2, $3; exit }')
  fi
  if [[ -z ${FORCE:-} && $have == "$mod $version" ]]; then
    log "$tool $version cached"
    return
  fi
  log "building $tool $version${have:+ (have: $have)}"
  GOBIN=$TOOLS_BIN timed go install "$pkg@$version"
}

main() {
  local tools=() t t0=$SECONDS
  (($#)) || set -- all
  for t in "$@"; do
    case $t in
      all) tools+=(crictl registry golangci-lint govulncheck indexdb) ;;
      crictl | registry | golangci-lint | govulncheck | indexdb) tools+=("$t") ;;
      *) usage ;;
    esac
  done
  mkdir -p "$TOOLS_BIN"
  for t in "${tools[@]}"; do install_tool "$t"; done
  log "install-tools took $((SECONDS - t0))s"
  echo "$TOOLS_BIN"
}

main "$@"
