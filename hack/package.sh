#!/usr/bin/env bash
# hack/package.sh — the release artefacts of a static (CGO_ENABLED=0) binary, into _output/packages/:
#   cri-dockerd-dockpin_<version>-1_<arch>.deb and cri-dockerd-dockpin-<version>-1.<arch>.rpm, built by
#   hack/tools/nfpkg (nfpm, pinned in hack/tools/go.mod) from packaging/nfpm.yaml;
#   cri-dockerd-<version>.<arch>.tgz in upstream's release layout (cri-dockerd/cri-dockerd).
# <version> is what the binary prints (--version); the changelog (_output/package/changelog.yml) has
# one entry, for it. Files are dated at the commit (SOURCE_DATE_EPOCH), so a rebuild of a commit
# gives the same packages.
# Usage: LDFLAGS='-X …' hack/package.sh   (the Makefile passes the version's ldflags)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

out=_output/packages
stage=_output/package
rm -rf "$out" "$stage"
mkdir -p "$out" "$stage"
arch=$(go env GOARCH)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

CGO_ENABLED=0 go build -trimpath -ldflags "${LDFLAGS:-}" -o "$stage/cri-dockerd" ./cmd/cri-dockerd
version=$("$stage/cri-dockerd" --version | awk 'NR == 1 { print $2 }')
[[ -n $version ]] || die "the binary printed no version"

# The changelog both formats carry (deb: changelog.Debian.gz, rpm: %changelog): one entry, this
# build's version and commit, dated at the commit. The maintainer is packaging/nfpm.yaml's.
maintainer=$(sed -n 's/^maintainer: //p' packaging/nfpm.yaml)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
cat >"$stage/changelog.yml" <<EOF
- semver: "$version-1"
  date: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  packager: "$maintainer"
  deb:
    urgency: medium
    distributions: [stable]
  changes:
    - commit: "$commit"
      note: "cri-dockerd $version: upstream cri-dockerd ${version%%+*} with image pinning, built from commit ${commit:0:12}."
EOF

(cd hack/tools && go build -o "../../$stage/nfpkg" ./nfpkg)
"$stage/nfpkg" -config packaging/nfpm.yaml -version "$version" -arch "$arch" -out "$out" >/dev/null

mkdir -p "$stage/tgz/cri-dockerd"
cp "$stage/cri-dockerd" "$stage/tgz/cri-dockerd/cri-dockerd"
tar -C "$stage/tgz" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -czf "$out/cri-dockerd-$version.$arch.tgz" cri-dockerd

log "packages of cri-dockerd $version:"
ls -l "$out" >&2
