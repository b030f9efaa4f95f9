#!/usr/bin/env bash
# hack/package-check.sh — inspects what `make package` wrote to _output/packages/: the .tgz's upstream
# layout and version line; the .deb's and .rpm's metadata (name, version, Epoch, Provides, Replaces or
# Obsoletes, Conflicts), contents, and scripts; the versions against upstream's packages of the same
# release. Then, in a scratch root (dpkg --root, rpm --root; the host's package databases and systemd
# are never touched): a stand-in for upstream's cri-dockerd .deb is installed, ours replaces it, is
# reinstalled (an upgrade) and removed, with a recording `systemctl` first on PATH checked after each
# step; the installed units pass hack/systemd-verify.sh with the real binary; the .rpm installs too.
# Usage: hack/package-check.sh   (after hack/package.sh)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

command -v rpm >/dev/null 2>&1 || ensure_apt rpm
out=_output/packages
name=cri-dockerd-dockpin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one SUFFIX — the one file of _output/packages whose name ends in SUFFIX.
one() {
  local f
  mapfile -t f < <(find "$out" -maxdepth 1 -type f -name "*$1")
  if ((${#f[@]} != 1)); then
    die "want exactly one $out/*$1 (run make package)"
  fi
  echo "${f[0]}"
}
# want WHAT GOT WANT
want() {
  [[ $2 == "$3" ]] || die "$1: got '$2', want '$3'"
}
deb=$(one .deb)
rpmf=$(one .rpm)
tgz=$(one .tgz)

# --- .tgz: upstream's release layout, cri-dockerd/cri-dockerd
want "tgz contents" "$(tar -tzf "$tgz" | sort | paste -sd' ')" "cri-dockerd/ cri-dockerd/cri-dockerd"
mkdir "$tmp/tgz"
tar -C "$tmp/tgz" -xzf "$tgz"
bin=$tmp/tgz/cri-dockerd/cri-dockerd
line=$("$bin" --version | head -n1)
[[ $line =~ ^cri-dockerd\ ([0-9]+\.[0-9]+\.[0-9]+\+dockpin\.[0-9A-Za-z.]+)\ \(([0-9a-f]{7})\)$ ]] ||
  die "version line: '$line'"
version=${BASH_REMATCH[1]}
release=${version%%+*}
arch=$(go env GOARCH)
rpmarch=$arch
[[ $arch != amd64 ]] || rpmarch=x86_64
[[ $arch != arm64 ]] || rpmarch=aarch64
want "tgz name" "${tgz##*/}" "cri-dockerd-$version.$arch.tgz"

# --- .deb metadata, contents, scripts
field() { dpkg-deb -f "$deb" "$1"; }
want "deb Package" "$(field Package)" "$name"
want "deb Version" "$(field Version)" "$version-1"
want "deb Architecture" "$(field Architecture)" "$arch"
want "deb Provides" "$(field Provides)" "cri-dockerd (= $version-1)"
want "deb Replaces" "$(field Replaces)" "cri-dockerd"
want "deb Conflicts" "$(field Conflicts)" "cri-dockerd"
want "deb Depends" "$(field Depends)" ""
# Upstream's .deb of the same release is <release>~3-0~<distro>-<suite>.
for up in "$release~3-0~debian-bookworm" "$release~3-0~ubuntu-noble" "$release"; do
  dpkg --compare-versions "$version-1" gt "$up" || die "deb $version-1 does not sort above upstream's $up"
done
want "deb contents" "$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $1, $2, $6 }' | sort | paste -sd';')" \
  "$(printf '%s\n' \
    '-rw-r--r-- root/root ./lib/systemd/system/cri-docker.service' \
    '-rw-r--r-- root/root ./lib/systemd/system/cri-docker.socket' \
    '-rw-r--r-- root/root ./usr/share/doc/cri-dockerd-dockpin/README.md' \
    '-rw-r--r-- root/root ./usr/share/doc/cri-dockerd-dockpin/copyright' \
    '-rwxr-xr-x root/root ./usr/bin/cri-dockerd' | sort | paste -sd';')"
dpkg-deb -e "$deb" "$tmp/control"
for s in postinst prerm postrm; do
  [[ -x $tmp/control/$s ]] || die "deb: $s missing or not executable"
  cmp -s "$tmp/control/$s" "packaging/scripts/$s.sh" || die "deb: $s differs from packaging/scripts/$s.sh"
done

# --- .rpm metadata, contents, scripts
q() { rpm -qp --qf "$1" "$rpmf" 2>/dev/null; }
want "rpm N E V R A" "$(q '%{NAME} %{EPOCH} %{VERSION} %{RELEASE} %{ARCH}')" "$name 3 $version 1 $rpmarch"
rpm -qp --provides "$rpmf" 2>/dev/null | grep -qxF "cri-dockerd = 3:$version-1" || die "rpm: no Provides cri-dockerd = 3:$version-1"
want "rpm Obsoletes" "$(rpm -qp --obsoletes "$rpmf" 2>/dev/null)" "cri-dockerd"
want "rpm Conflicts" "$(rpm -qp --conflicts "$rpmf" 2>/dev/null)" "cri-dockerd"
# Upstream's .rpm of the same release is 3:<release>-3.<dist>.
for up in "3:$release-3.el9" "3:$release-3.fc41"; do
  want "rpm vercmp 3:$version-1 vs $up" "$(rpm --eval "%{lua: print(rpm.vercmp('3:$version-1', '$up'))}")" 1
done
want "rpm contents" "$(rpm -qlpv "$rpmf" 2>/dev/null | awk '{ print $1, $3, $4, $9 }' | sort | paste -sd';')" \
  "$(printf '%s\n' \
    '-rw-r--r-- root root /usr/lib/systemd/system/cri-docker.service' \
    '-rw-r--r-- root root /usr/lib/systemd/system/cri-docker.socket' \
    '-rw-r--r-- root root /usr/share/doc/cri-dockerd-dockpin/README.md' \
    '-rw-r--r-- root root /usr/share/doc/cri-dockerd-dockpin/copyright' \
    '-rwxr-xr-x root root /usr/bin/cri-dockerd' | sort | paste -sd';')"
for s in POSTIN:postinst POSTTRANS:postinst PREUN:prerm POSTUN:postrm; do
  want "rpm %{${s%%:*}}" "$(q "%{${s%%:*}}")" "$(cat "packaging/scripts/${s#*:}.sh")"
done
mkdir "$tmp/rpmroot"
rpm --root "$tmp/rpmroot" --initdb
rpm --root "$tmp/rpmroot" -i --noscripts "$rpmf" 2>/dev/null
want "rpm -qf /usr/bin/cri-dockerd" "$(rpm --root "$tmp/rpmroot" -qf --qf '%{NAME}' /usr/bin/cri-dockerd)" "$name"
cmp -s "$tmp/rpmroot/usr/bin/cri-dockerd" "$bin" || die "rpm: /usr/bin/cri-dockerd is not the .tgz's binary"

# --- the .deb in a scratch root: replaces upstream's package, upgrades, is removed
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/run/systemd/system" "$tmp/bin"
touch "$root/var/lib/dpkg/status"
# A recording systemctl; the scripts see $DPKG_ROOT/run/systemd/system, so they think systemd runs.
printf '#!/bin/sh\necho "$*" >>"%s"\n' "$tmp/systemctl.log" >"$tmp/bin/systemctl"
chmod 0755 "$tmp/bin/systemctl"
dpkgr() {
  PATH="$tmp/bin:$PATH" dpkg --root="$root" --force-script-chrootless --log=/dev/null "$@" >"$tmp/dpkg.out" 2>&1 ||
    die "dpkg $*: $(cat "$tmp/dpkg.out")"
}
# calls STEP WANT — the systemctl calls the scripts made in STEP (then forgotten).
calls() {
  want "systemctl calls ($1)" "$(paste -sd';' "$tmp/systemctl.log" 2>/dev/null)" "$2"
  rm -f "$tmp/systemctl.log"
}
status() { dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null || true; }

# upstream's package, as far as files go: the binary and the units at the same paths
up=$tmp/upstream
mkdir -p "$up/DEBIAN" "$up/usr/bin" "$up/lib/systemd/system"
printf '#!/bin/sh\necho upstream\n' >"$up/usr/bin/cri-dockerd"
chmod 0755 "$up/usr/bin/cri-dockerd"
cp packaging/systemd/cri-docker.* "$up/lib/systemd/system/"
printf 'Package: cri-dockerd\nVersion: %s\nArchitecture: %s\nMaintainer: stand-in <none@invalid>\nDescription: stand-in for upstream cri-dockerd\n' \
  "$release~3-0~debian-bookworm" "$arch" >"$up/DEBIAN/control"
dpkg-deb --root-owner-group -b "$up" "$tmp/upstream.deb" >/dev/null
dpkgr -i "$tmp/upstream.deb"
want "upstream installed" "$(status cri-dockerd)" "ii "

dpkgr -i "$deb"
want "ours installed" "$(status "$name")" "ii "
[[ $(status cri-dockerd) != "ii " ]] || die "upstream's cri-dockerd still installed next to ours"
want "owner of /usr/bin/cri-dockerd" "$(dpkg-query --admindir="$root/var/lib/dpkg" -S /usr/bin/cri-dockerd)" "$name: /usr/bin/cri-dockerd"
cmp -s "$root/usr/bin/cri-dockerd" "$bin" || die "deb: /usr/bin/cri-dockerd is not the .tgz's binary"
calls "install over upstream's" "daemon-reload;unmask cri-docker.service cri-docker.socket;enable cri-docker.socket cri-docker.service;start cri-docker.socket;restart cri-docker.service"
hack/systemd-verify.sh "$root"

dpkgr -i "$deb"
calls "upgrade" "daemon-reload;try-restart cri-docker.service"

dpkgr -r "$name"
calls "remove" "disable --now cri-docker.service cri-docker.socket;daemon-reload"
[[ ! -e $root/usr/bin/cri-dockerd ]] || die "deb: /usr/bin/cri-dockerd left after removal"

log "packages checked: $(basename "$deb"), $(basename "$rpmf"), $(basename "$tgz")"
