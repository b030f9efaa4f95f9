#!/usr/bin/env bash
# hack/systemd-verify.sh — `systemd-analyze verify` of our units, as systemd on a node would load
# them, plus the facts a drop-in for upstream's units must keep (socket path, mode, group, fd://
# activation, Type=notify, SIGHUP on reload), and ours: flags from /etc/default/cri-dockerd or
# /etc/sysconfig/cri-dockerd ($CRI_DOCKERD_OPTS), the start limit in the form EL7's systemd 219 reads.
# Any warning systemd prints fails the check (verify itself exits 0 on a directive it ignores).
# Usage: hack/systemd-verify.sh [ROOT]
#   no ROOT: the units under packaging/systemd/, with a stub /usr/bin/cri-dockerd in a scratch root;
#   ROOT:    a package's unpacked tree (usr/bin/cri-dockerd and lib/systemd/system/ or
#            usr/lib/systemd/system/ inside it), checked as installed.
# Never touches the host's own units.
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

command -v systemd-analyze >/dev/null 2>&1 || ensure_apt systemd

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
# The manager needs its own targets (sysinit.target, sockets.target, …) inside the root.
cp -r /lib/systemd/system "$root/usr/lib/systemd/"
cp /bin/kill "$root/bin/kill"
if (($#)); then
  src=$1
  units=$src/lib/systemd/system
  [[ -d $units ]] || units=$src/usr/lib/systemd/system
  [[ -x $src/usr/bin/cri-dockerd ]] || die "$src: no executable usr/bin/cri-dockerd"
  cp "$src/usr/bin/cri-dockerd" "$root/usr/bin/cri-dockerd"
else
  units=packaging/systemd
  printf '#!/bin/sh\n' >"$root/usr/bin/cri-dockerd"
  chmod 0755 "$root/usr/bin/cri-dockerd"
fi
for u in cri-docker.service cri-docker.socket; do
  [[ -f $units/$u ]] || die "$units/$u is missing"
  cp "$units/$u" "$root/etc/systemd/system/$u"
done

out=$(systemd-analyze verify --root="$root" --man=no --generators=no cri-docker.service cri-docker.socket 2>&1) ||
  die "systemd-analyze verify failed: $out"
[[ -z $out ]] || die "systemd-analyze verify warns: $out"

# expect UNIT LINE — the unit has exactly this line.
expect() {
  grep -qxF -- "$2" "$root/etc/systemd/system/$1" || die "$1: no line '$2'"
}
expect cri-docker.socket 'ListenStream=%t/cri-dockerd.sock'
expect cri-docker.socket 'SocketMode=0660'
expect cri-docker.socket 'SocketGroup=docker'
expect cri-docker.socket 'PartOf=cri-docker.service'
expect cri-docker.service 'Type=notify'
expect cri-docker.service 'Requires=cri-docker.socket'
# upstream's ExecStart, optionally followed by the operator's flags from an environment file
# shellcheck disable=SC2016 # a literal $ in the unit
grep -qxE -- 'ExecStart=/usr/bin/cri-dockerd --container-runtime-endpoint fd://( \$CRI_DOCKERD_OPTS)?' \
  "$root/etc/systemd/system/cri-docker.service" ||
  die "cri-docker.service: no line 'ExecStart=/usr/bin/cri-dockerd --container-runtime-endpoint fd://[ \$CRI_DOCKERD_OPTS]'"
expect cri-docker.service "ExecReload=/bin/kill -s HUP \$MAINPID"
expect cri-docker.service 'Restart=always'
# Where the operator's flags come from; both optional, so a node without either file starts.
expect cri-docker.service 'EnvironmentFile=-/etc/default/cri-dockerd'
expect cri-docker.service 'EnvironmentFile=-/etc/sysconfig/cri-dockerd'
# The start limit in [Service] under its old name, which systemd 219 (EL7) also reads.
[[ $(sed -n '/^\[Service\]/,/^\[/p' "$root/etc/systemd/system/cri-docker.service") == *$'\nStartLimitInterval='* ]] ||
  die "cri-docker.service: no StartLimitInterval= in [Service]"
log "systemd units: verified ($units)"
