#!/usr/bin/env bash
# hack/install-criu.sh — build (or reuse from the cache) criu CRIU_VERSION (lib.sh) into CRIU_BIN, the
# checkpointer runc runs for the engine's checkpoints (CheckpointContainer). Debian 12's own criu
# (3.17.1) fails on kernels that map a [vvar_vclock] area (6.x: "vdso: Unexpected rt vDSO area
# bounds"), so this builds the release Debian's bookworm-backports carries from Debian's source tarball
# (checked against CRIU_SHA256), with Debian's -dev packages. About 2 minutes on 2 cores.
# Prints CRIU_BIN as its last line.
# Usage: hack/install-criu.sh        (FORCE=1 rebuilds)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CRIU_URL=http://deb.debian.org/debian/pool/main/c/criu/criu_${CRIU_VERSION}.orig.tar.xz
CRIU_APT_PACKAGES=(gcc make pkg-config python3 libprotobuf-dev libprotobuf-c-dev protobuf-c-compiler
  protobuf-compiler python3-protobuf libnl-3-dev libcap-dev libnet1-dev libbsd-dev libaio-dev uuid-dev
  libgnutls28-dev curl xz-utils)

# cached — CRIU_BIN/criu runs and reports CRIU_VERSION.
cached() {
  [[ -x $CRIU_BIN/criu ]] && "$CRIU_BIN/criu" --version 2>/dev/null | grep -qxF "Version: $CRIU_VERSION"
}

build() {
  local work
  ensure_apt "${CRIU_APT_PACKAGES[@]}"
  work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this work dir
  trap "rm -rf '$work'" EXIT
  curl -fsS --retry 3 -o "$work/criu.tar.xz" "$CRIU_URL"
  echo "$CRIU_SHA256  $work/criu.tar.xz" | sha256sum -c --quiet - || die "$CRIU_URL does not match CRIU_SHA256"
  tar -C "$work" -xf "$work/criu.tar.xz"
  timed make -C "$work/criu-$CRIU_VERSION" -j"$(nproc)" criu >"$work/build.log" 2>&1 ||
    { tail -n 30 "$work/build.log" >&2; die "building criu $CRIU_VERSION failed"; }
  mkdir -p "$CRIU_BIN"
  cp "$work/criu-$CRIU_VERSION/criu/criu" "$CRIU_BIN/criu.tmp"
  mv "$CRIU_BIN/criu.tmp" "$CRIU_BIN/criu"
}

build_unless_cached "criu $CRIU_VERSION" "from Debian's source, about 2 minutes"
"$CRIU_BIN/criu" check >&2 || log "criu check: some kernel features are missing (see above)"
echo "$CRIU_BIN"
