#!/usr/bin/env bash
# hack/install-tools.sh — build (or reuse) crictl, registry, golangci-lint, govulncheck, indexdb
# (golang.org/x/vulndb's builder of an offline vulnerability database) and checkpointctl (reads
# checkpoint archives) and ginkgo (the CLI that runs the node conformance suite) into TOOLS_BIN; and, asked by
# name (ensure_docker_cli in lib.sh, on a machine without one), the docker CLI.
# A tool is reused only if `go version -m` shows it was built from the pinned module version,
# so bumping a *_VERSION in lib.sh rebuilds it. Prints TOOLS_BIN as its last line.
# Usage: hack/install-tools.sh [crictl|registry|golangci-lint|govulncheck|indexdb|checkpointctl|ginkgo|docker|all]...
#        (default all, which leaves out docker; FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { echo "usage: $0 [crictl|registry|golangci-lint|govulncheck|indexdb|checkpointctl|ginkgo|docker|all]..." >&2; exit 2; }

# package_of TOOL — "module package-path version" to go install for TOOL.
package_of() {
  case $1 in
    crictl) echo "sigs.k8s.io/cri-tools sigs.k8s.io/cri-tools/cmd/crictl $CRICTL_VERSION" ;;
    registry) echo "github.com/distribution/distribution/v3 github.com/distribution/distribution/v3/cmd/registry $REGISTRY_VERSION" ;;
    golangci-lint) echo "github.com/golangci/golangci-lint/v2 github.com/golangci/golangci-lint/v2/cmd/golangci-lint $GOLANGCI_LINT_VERSION" ;;
    govulncheck) echo "golang.org/x/vuln golang.org/x/vuln/cmd/govulncheck $GOVULNCHECK_VERSION" ;;
    indexdb) echo "golang.org/x/vulndb golang.org/x/vulndb/cmd/indexdb $VULNDB_VERSION" ;;
    checkpointctl) echo "github.com/checkpoint-restore/checkpointctl github.com/checkpoint-restore/checkpointctl $CHECKPOINTCTL_VERSION" ;;
    ginkgo) echo "github.com/onsi/ginkgo/v2 github.com/onsi/ginkgo/v2/ginkgo $GINKGO_VERSION" ;;
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

# install_docker_cli — the docker CLI at DOCKER_CLI_VERSION (the 28 series, whose output the e2e suite
# reads: 29's `docker events --format {{.ID}}` and error texts differ). github.com/docker/cli has no go.mod
# (its vendor.mod plays that part, and the module proxy's zip has no vendor/), so `go install` cannot build
# it: its source is copied, vendor.mod becomes go.mod, and it builds in module mode.
install_docker_cli() {
  local work dir version=${DOCKER_CLI_VERSION#v}
  version=${version%+incompatible}
  if [[ -z ${FORCE:-} && -x $TOOLS_BIN/docker ]] &&
    "$TOOLS_BIN/docker" --version 2>/dev/null | grep -qF "version $version,"; then
    log "docker CLI $DOCKER_CLI_VERSION cached"
    return
  fi
  log "building the docker CLI $DOCKER_CLI_VERSION"
  ensure_apt jq
  dir=$(go mod download -json "github.com/docker/cli@$DOCKER_CLI_VERSION" | jq -r '.Dir // empty')
  [[ -d $dir ]] || die "go mod download github.com/docker/cli@$DOCKER_CLI_VERSION failed"
  work=$(mktemp -d)
  cp -R "$dir/." "$work/"
  chmod -R u+w "$work"
  (
    cd "$work"
    rm -rf vendor
    cp vendor.mod go.mod
    cp vendor.sum go.sum
    CGO_ENABLED=0 GOFLAGS="$GOFLAGS -mod=mod" timed go build -trimpath \
      -ldflags "-X github.com/docker/cli/cli/version.Version=$version" -o "$TOOLS_BIN/docker" ./cmd/docker
  ) || { rm -rf "$work"; die "building the docker CLI failed"; }
  rm -rf "$work"
}

main() {
  local tools=() t t0=$SECONDS
  (($#)) || set -- all
  for t in "$@"; do
    case $t in
      all) tools+=(crictl registry golangci-lint govulncheck indexdb) ;;
      crictl | registry | golangci-lint | govulncheck | indexdb | checkpointctl | ginkgo | docker) tools+=("$t") ;;
      *) usage ;;
    esac
  done
  mkdir -p "$TOOLS_BIN"
  for t in "${tools[@]}"; do
    if [[ $t == docker ]]; then install_docker_cli; else install_tool "$t"; fi
  done
  log "install-tools took $((SECONDS - t0))s"
  echo "$TOOLS_BIN"
}

main "$@"
