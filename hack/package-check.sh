#!/usr/bin/env bash
# hack/package-check.sh — inspects what `make package` wrote to _output/packages/: the .tgz's upstream
# layout and version line; the .deb's and .rpm's metadata (name, version, Epoch, maintainer,
# dependencies, Provides, Replaces, Obsoletes, Conflicts), contents, config files, changelog and
# scripts; the versions against upstream's packages of the same release.
# Then it installs them, the way an operator does, into scratch roots where the maintainer scripts
# run chrooted as on a node (dpkg --root, apt-get and dnf on that root, rpm --root; busybox-static
# gives the root its /bin/sh). A stand-in `systemctl` keeps the units' state on disk as systemd does
# (enablement links, masks) and whether each unit runs; a stand-in for the installed binary records
# `cri-dockerd pins release` with its flags. After each step it asserts the state of
# cri-docker.socket and cri-docker.service (enabled/disabled/masked, active/inactive) and how many
# releases ran:
#   deb: over upstream's package (its removal's mask undone), upgrade, reinstall (an operator's
#        disable kept), remove (the release gets CRI_DOCKERD_OPTS), remove → install, a release that
#        fails (engine down) not failing the removal, purge → install, pins kept
#        (CRI_DOCKERD_KEEP_PINS=1, /etc/cri-dockerd/keep-pins), an operator's mask kept across
#        install, upgrade and remove → install, an install without running systemd (enabled, not
#        started), back to upstream's .deb with apt (which removes ours first), ours again; dpkg
#        --root chrootless (DPKG_ROOT) with the real deb-systemd-helper: its own mask undone, an
#        operator's kept, nothing started or released;
#   rpm: over upstream's with dnf --allowerasing, upgrade, reinstall (a disable kept), erase (the
#        release gets CRI_DOCKERD_OPTS from /etc/sysconfig), erase → install, pins kept through dnf
#        remove, a mask kept, back to upstream's with dnf --allowerasing (upstream's binary is in
#        place before our %preun: no release, a warning, the units stay enabled and running).
# The installed units pass hack/systemd-verify.sh with the real binary. Host systemd, package
# databases and engine are never touched.
# Usage: hack/package-check.sh   (after hack/package.sh)
set -euo pipefail
# shellcheck source=hack/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HACK_DIR/.."

ensure_apt rpm dnf busybox-static dpkg-dev
out=_output/packages
name=cri-dockerd-dockpin
maintainer="cri-dockerd with image pinning maintainers <maintainers@users.noreply.a-seed-6e429e03.example>"
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

# The docs shipped: README.md and docs/*.md (under docs/, so that README's links resolve).
mapfile -t docs < <(cd docs && ls -- *.md)
((${#docs[@]})) || die "no docs/*.md"

# --- .deb metadata, contents, scripts
field() { dpkg-deb -f "$deb" "$1"; }
want "deb Package" "$(field Package)" "$name"
want "deb Version" "$(field Version)" "$version-1"
want "deb Architecture" "$(field Architecture)" "$arch"
want "deb Maintainer" "$(field Maintainer)" "$maintainer"
want "deb Provides" "$(field Provides)" "cri-dockerd (= $version-1)"
want "deb Replaces" "$(field Replaces)" "cri-dockerd"
want "deb Conflicts" "$(field Conflicts)" "cri-dockerd"
# Nothing that apt would install on its own: no second Docker on a node whose Docker has no package.
want "deb Depends" "$(field Depends)" ""
want "deb Pre-Depends" "$(field Pre-Depends)" ""
want "deb Recommends" "$(field Recommends)" ""
want "deb Suggests" "$(field Suggests)" "docker-ce | docker.io | moby-engine"
# Upstream's .deb of the same release is <release>~3-0~<distro>-<suite>.
for up in "$release~3-0~debian-bookworm" "$release~3-0~ubuntu-noble" "$release"; do
  dpkg --compare-versions "$version-1" gt "$up" || die "deb $version-1 does not sort above upstream's $up"
done
doc=/usr/share/doc/$name
want "deb contents" "$(dpkg-deb -c "$deb" | awk '{ print $1, $6 }' | sort | paste -sd';')" \
  "$(
    {
      printf 'drwxr-xr-x .%s/\n' /etc /etc/cri-dockerd /etc/cri-dockerd/pins.d /etc/default /lib /lib/systemd \
        /lib/systemd/system /usr /usr/bin /usr/share /usr/share/doc "$doc" "$doc/docs" /var /var/lib \
        /var/lib/cri-dockerd-dockpin
      printf -- '-rw-r--r-- .%s\n' /etc/default/cri-dockerd /lib/systemd/system/cri-docker.service \
        /lib/systemd/system/cri-docker.socket "$doc/README.md" "$doc/changelog.Debian.gz" "$doc/copyright" \
        "${docs[@]/#/$doc/docs/}"
      echo '-rwxr-xr-x ./usr/bin/cri-dockerd'
    } | sort | paste -sd';'
  )"
want "deb files not owned by root" "$(dpkg-deb -c "$deb" | awk '$2 != "root/root" && $2 != "0/0"')" ""
dpkg-deb -x "$deb" "$tmp/debfiles"
cmp -s "$tmp/debfiles/etc/default/cri-dockerd" packaging/config/cri-dockerd.env || die "deb: /etc/default/cri-dockerd differs"
cmp -s "$tmp/debfiles$doc/copyright" packaging/copyright || die "deb: copyright differs from packaging/copyright"
head -n1 "$tmp/debfiles$doc/copyright" | grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  die "deb: copyright is not machine-readable (DEP-5)"
grep -qx 'License: Apache-2.0' "$tmp/debfiles$doc/copyright" || die "deb: copyright names no Apache-2.0"
zcat "$tmp/debfiles$doc/changelog.Debian.gz" >"$tmp/changelog"
want "deb changelog" "$(dpkg-parsechangelog -l "$tmp/changelog" -S Source)/$(dpkg-parsechangelog -l "$tmp/changelog" -S Version)/$(dpkg-parsechangelog -l "$tmp/changelog" -S Maintainer)" \
  "$name/$version-1/$maintainer"
dpkg-deb -e "$deb" "$tmp/control"
want "deb conffiles" "$(cat "$tmp/control/conffiles")" "/etc/default/cri-dockerd"
for s in preinst postinst prerm postrm; do
  [[ -x $tmp/control/$s ]] || die "deb: $s missing or not executable"
  cmp -s "$tmp/control/$s" "packaging/scripts/$s.sh" || die "deb: $s differs from packaging/scripts/$s.sh"
done

# --- .rpm metadata, contents, scripts
q() { rpm -qp --qf "$1" "$rpmf" 2>/dev/null; }
want "rpm N E V R A" "$(q '%{NAME} %{EPOCH} %{VERSION} %{RELEASE} %{ARCH}')" "$name 3 $version 1 $rpmarch"
want "rpm Packager/Vendor" "$(q '%{PACKAGER}/%{VENDOR}')" "$maintainer/dockpin"
rpm -qp --provides "$rpmf" 2>/dev/null | grep -qxF "cri-dockerd = 3:$version-1" || die "rpm: no Provides cri-dockerd = 3:$version-1"
# No Obsoletes: it would make `dnf install cri-dockerd` install ours, and keep upstream's from coming back.
want "rpm Obsoletes" "$(rpm -qp --obsoletes "$rpmf" 2>/dev/null)" ""
want "rpm Conflicts" "$(rpm -qp --conflicts "$rpmf" 2>/dev/null)" "cri-dockerd"
want "rpm Requires" "$(rpm -qp --requires "$rpmf" 2>/dev/null | grep -v '^rpmlib(' || true)" ""
want "rpm weak dependencies" "$(q '%{RECOMMENDNAME}%{SUGGESTNAME}%{SUPPLEMENTNAME}%{ENHANCENAME}' | sed 's/(none)//g')" ""
# Upstream's .rpm of the same release is 3:<release>-3.<dist>.
for up in "3:$release-3.el9" "3:$release-3.fc41"; do
  want "rpm vercmp 3:$version-1 vs $up" "$(rpm --eval "%{lua: print(rpm.vercmp('3:$version-1', '$up'))}")" 1
done
want "rpm contents" "$(q '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags} %{FILENAMES}\n]' | sort | paste -sd';')" \
  "$(
    {
      printf 'drwxr-xr-x root:root  %s\n' /etc/cri-dockerd /etc/cri-dockerd/pins.d /var/lib/cri-dockerd-dockpin
      echo '-rw-r--r-- root:root cn /etc/sysconfig/cri-dockerd'
      echo '-rw-r--r-- root:root l /usr/share/licenses/cri-dockerd-dockpin/LICENSE'
      printf -- '-rw-r--r-- root:root  %s\n' /usr/lib/systemd/system/cri-docker.service \
        /usr/lib/systemd/system/cri-docker.socket "$doc/README.md" "${docs[@]/#/$doc/docs/}"
      echo '-rwxr-xr-x root:root  /usr/bin/cri-dockerd'
    } | sort | paste -sd';'
  )"
want "rpm %changelog" "$(q '%{CHANGELOGNAME}')" "$maintainer - $version-1"
for s in PREIN:preinst POSTIN:postinst POSTTRANS:postinst PREUN:prerm POSTUN:postrm; do
  want "rpm %{${s%%:*}}" "$(q "%{${s%%:*}}")" "$(cat "packaging/scripts/${s#*:}.sh")"
done

# --- scratch roots
# The stand-ins, written into each root: systemctl (state on disk, as systemd keeps it), the part of
# deb-systemd-helper that packages call (mask, unmask, purge; the real one is Perl), our binary
# (records `pins release`) and upstream's (no such command).
mkdir -p "$tmp/stub"
cat >"$tmp/stub/systemctl" <<'EOF'
#!/bin/sh
# Stand-in systemctl: enablement is the .wants/ links of [Install] WantedBy= under /etc/systemd/system,
# a mask the link to /dev/null there, as systemd keeps them; a running unit has a file
# /run/fake-systemd/<unit>.active. Requires= starts, PartOf= stops along. --root=DIR works on DIR.
root= now= verb= units=
for a in "$@"; do
  case $a in
    --root=*) root=${a#--root=} ;;
    --now) now=1 ;;
    -*) ;;
    *) if [ -z "$verb" ]; then verb=$a; else units="$units $a"; fi ;;
  esac
done
etc=$root/etc/systemd/system
run=$root/run/fake-systemd
dirs="$etc $root/lib/systemd/system $root/usr/lib/systemd/system"
mkdir -p "$run"
echo "$*" >>"$run/calls"
unitfile() {
  for d in $dirs; do
    if [ -f "$d/$1" ] && [ ! -L "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  return 1
}
masked() { [ -L "$etc/$1" ] && [ "$(readlink "$etc/$1")" = /dev/null ]; }
key() { f=$(unitfile "$1") && sed -n "s/^$2=//p" "$f"; }
enabled() { ls "$etc"/*.wants/"$1" >/dev/null 2>&1; }
start() {
  if masked "$1"; then echo "Failed to start $1: Unit $1 is masked." >&2; return 1; fi
  unitfile "$1" >/dev/null || { echo "Failed to start $1: Unit $1 not found." >&2; return 1; }
  for r in $(key "$1" Requires); do start "$r" || return 1; done
  : >"$run/$1.active"
}
stop() {
  rm -f "$run/$1.active"
  for f in $(grep -l "^PartOf=$1\$" $dirs/* 2>/dev/null); do rm -f "$run/${f##*/}.active"; done
}
rc=0
case $verb in
  daemon-reload | preset | reset-failed) ;;
  enable)
    for u in $units; do
      if masked "$u"; then echo "Failed to enable unit: Unit file $u is masked." >&2; rc=1; continue; fi
      f=$(unitfile "$u") || { echo "Failed to enable unit: Unit file $u does not exist." >&2; rc=1; continue; }
      for t in $(key "$u" WantedBy); do mkdir -p "$etc/$t.wants" && ln -sf "${f#"$root"}" "$etc/$t.wants/$u"; done
      [ -z "$now" ] || start "$u" || rc=1
    done ;;
  disable)
    for u in $units; do
      rm -f "$etc"/*.wants/"$u"
      [ -z "$now" ] || stop "$u"
    done ;;
  start | restart) for u in $units; do start "$u" || rc=1; done ;;
  try-restart) for u in $units; do [ ! -e "$run/$u.active" ] || ! masked "$u" || rc=1; done ;;
  stop) for u in $units; do stop "$u"; done ;;
  mask) for u in $units; do mkdir -p "$etc" && ln -sf /dev/null "$etc/$u"; [ -z "$now" ] || stop "$u"; done ;;
  unmask) for u in $units; do if masked "$u"; then rm -f "$etc/$u"; fi; done ;;
  is-enabled)
    for u in $units; do
      if masked "$u"; then echo masked; rc=1
      elif enabled "$u"; then echo enabled
      elif unitfile "$u" >/dev/null; then echo disabled; rc=1
      else echo "Failed to get unit file state for $u: No such file or directory" >&2; rc=1; fi
    done ;;
  is-active) for u in $units; do if [ -e "$run/$u.active" ]; then echo active; else echo inactive; rc=3; fi; done ;;
  *) echo "stand-in systemctl: $verb is not supported" >&2; rc=1 ;;
esac
exit $rc
EOF
cat >"$tmp/stub/deb-systemd-helper" <<'EOF'
#!/bin/sh
# Stand-in deb-systemd-helper (mask, unmask, purge): a mask it makes is recorded under
# /var/lib/systemd/deb-systemd-helper-masked/, and unmask undoes only such a mask, as the real one.
action=$1
shift
etc=/etc/systemd/system
state=/var/lib/systemd/deb-systemd-helper-masked
for u in "$@"; do
  case $action in
    mask) if [ ! -e "$etc/$u" ] && [ ! -L "$etc/$u" ]; then mkdir -p "$etc" "$state" && ln -s /dev/null "$etc/$u" && : >"$state/$u"; fi ;;
    unmask) if [ -L "$etc/$u" ] && [ "$(readlink "$etc/$u")" = /dev/null ] && [ -e "$state/$u" ]; then rm -f "$etc/$u" "$state/$u"; fi ;;
    purge) ;;
    *) echo "stand-in deb-systemd-helper: $action is not supported" >&2; exit 1 ;;
  esac
done
EOF
cat >"$tmp/stub/cri-dockerd" <<EOF
#!/bin/sh
# Stand-in for our binary: records \`pins release\` (the package-check never reaches an engine),
# which fails as with the engine down while /run/fake-systemd/engine-down exists.
case "\$1" in
  --version) echo "cri-dockerd $version (0000000)" ;;
  pins)
    echo "\$*" >>/run/fake-systemd/releases
    if [ -e /run/fake-systemd/engine-down ]; then echo "cri-dockerd: pins release: engine unreachable" >&2; exit 1; fi ;;
esac
EOF
cat >"$tmp/stub/upstream-cri-dockerd" <<'EOF'
#!/bin/sh
# Stand-in for upstream's binary, which has no subcommand.
case "$1" in
  --version) echo "cri-dockerd 0.4.3 (d969e29)" ;;
  *) echo "Unknown command: $1" >&2; exit 1 ;;
esac
EOF
chmod 0755 "$tmp/stub"/*

# newroot DIR — a root whose scripts run chrooted: busybox as /bin/sh and the tools, the stand-ins,
# /run/systemd/system (systemd runs), empty dpkg and apt state.
newroot() {
  local r=$1
  mkdir -p "$r/bin" "$r/usr/bin" "$r/run/systemd/system" "$r/run/fake-systemd" "$r/var/lib/dpkg/info" \
    "$r/var/lib/dpkg/updates" "$r/etc/apt/apt.conf.d" "$r/etc/apt/preferences.d" "$r/etc/apt/sources.list.d" \
    "$r/var/cache/apt/archives/partial" "$r/var/lib/apt/lists/partial" "$r/var/log"
  touch "$r/var/lib/dpkg/status" "$r/etc/apt/sources.list"
  mkdir -p "$r/dev" "$r/tmp"
  mknod -m 0666 "$r/dev/null" c 1 3
  cp /bin/busybox "$r/bin/busybox"
  chroot "$r" /bin/busybox --install -s /bin
  cp "$tmp/stub/systemctl" "$tmp/stub/deb-systemd-helper" "$r/usr/bin/"
}

# units ROOT — the state of cri-docker.socket and cri-docker.service on ROOT's disk, e.g.
# "enabled,active enabled,active": masked, enabled (a .wants/ link) or disabled; active or inactive.
units() {
  local u s out=()
  for u in cri-docker.socket cri-docker.service; do
    if [[ -L $1/etc/systemd/system/$u && $(readlink "$1/etc/systemd/system/$u") == /dev/null ]]; then
      s=masked
    elif compgen -G "$1/etc/systemd/system/*.wants/$u" >/dev/null; then
      s=enabled
    else
      s=disabled
    fi
    if [[ -e $1/run/fake-systemd/$u.active ]]; then s+=,active; else s+=,inactive; fi
    out+=("$s")
  done
  echo "${out[*]}"
}
summary=()
# expect ROOT STEP UNITS RELEASES — the units' state after STEP, and how many `pins release` ran in
# it (then forgotten). Each step also puts our stand-in over an installed binary of ours.
expect() {
  local n=0
  [[ ! -f $1/run/fake-systemd/releases ]] || n=$(wc -l <"$1/run/fake-systemd/releases")
  rm -f "$1/run/fake-systemd/releases" "$1/run/fake-systemd/calls"
  want "$2: socket and service" "$(units "$1")" "$3"
  want "$2: pins releases" "$n" "$4"
  summary+=("$(printf '%-50s %-36s releases=%s' "$2" "$3" "$4")")
  ours "$1"
}
# ours ROOT — when ROOT's /usr/bin/cri-dockerd is this package's binary, replace it by the stand-in.
ours() {
  if [[ -f $1/usr/bin/cri-dockerd ]] && cmp -s "$1/usr/bin/cri-dockerd" "$bin"; then
    cp "$tmp/stub/cri-dockerd" "$1/usr/bin/cri-dockerd"
  fi
}
# operator ROOT ARGS — the operator runs systemctl ARGS on the node.
operator() { chroot "$1" /usr/bin/systemctl "${@:2}" >/dev/null 2>&1 || true; }

# The next version of ours (release 2), with the stand-in as its binary, built by nfpkg as ours are.
# shellcheck disable=SC2016 # ${VERSION} is nfpm's
sed -e 's/^release: "1"$/release: "2"/' -e 's/\${VERSION}-1/${VERSION}-2/' \
  -e "s#src: _output/package/cri-dockerd\$#src: $tmp/stub/cri-dockerd#" packaging/nfpm.yaml >"$tmp/next.yaml"
if ! grep -q 'release: "2"' "$tmp/next.yaml" || ! grep -q "src: $tmp/stub/cri-dockerd" "$tmp/next.yaml"; then
  die "could not make the next version's nfpm.yaml"
fi
_output/package/nfpkg -config "$tmp/next.yaml" -version "$version" -arch "$arch" -out "$tmp/next" >/dev/null
next_deb=$(find "$tmp/next" -name '*.deb')
next_rpm=$(find "$tmp/next" -name '*.rpm')

# --- .deb: a stand-in for upstream's package, as far as files and scripts go: the binary and the
# units at the same paths; debhelper's scripts (enable and start on configure; stop on remove;
# older debhelper, as upstream's builds use, masks the units on remove through deb-systemd-helper).
up=$tmp/upstream
mkdir -p "$up/DEBIAN" "$up/usr/bin" "$up/lib/systemd/system"
cp "$tmp/stub/upstream-cri-dockerd" "$up/usr/bin/cri-dockerd"
cp packaging/systemd/cri-docker.* "$up/lib/systemd/system/"
printf 'Package: cri-dockerd\nVersion: %s\nArchitecture: %s\nMaintainer: stand-in <none@invalid>\nDescription: stand-in for upstream cri-dockerd\n' \
  "$release~3-0~debian-bookworm" "$arch" >"$up/DEBIAN/control"
cat >"$up/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  deb-systemd-helper unmask cri-docker.socket cri-docker.service || true
  systemctl enable cri-docker.socket cri-docker.service || true
  if [ -d /run/systemd/system ]; then systemctl start cri-docker.socket cri-docker.service || true; fi
fi
EOF
cat >"$up/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then systemctl stop cri-docker.socket cri-docker.service || true; fi
EOF
cat >"$up/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
case "$1" in
  remove) deb-systemd-helper mask cri-docker.socket cri-docker.service || true ;;
  purge) deb-systemd-helper purge cri-docker.socket cri-docker.service || true
    deb-systemd-helper unmask cri-docker.socket cri-docker.service || true ;;
esac
EOF
chmod 0755 "$up/DEBIAN/postinst" "$up/DEBIAN/prerm" "$up/DEBIAN/postrm"
dpkg-deb --root-owner-group -b "$up" "$tmp/upstream.deb" >/dev/null

d=$tmp/deb
newroot "$d"
run() { "$@" >"$tmp/cmd.out" 2>&1 || die "$*: $(cat "$tmp/cmd.out")"; }
dpkgr() { run dpkg --root="$d" --log=/dev/null "$@"; }
status() { dpkg-query --admindir="$d/var/lib/dpkg" -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null || true; }

dpkgr -i "$tmp/upstream.deb"
want "upstream installed" "$(status cri-dockerd)" "ii "
expect "$d" "deb: upstream's package" "enabled,active enabled,active" 0

dpkgr -i "$deb"
want "ours installed" "$(status "$name")" "ii "
[[ $(status cri-dockerd) != "ii " ]] || die "upstream's cri-dockerd still installed next to ours"
want "owner of /usr/bin/cri-dockerd" "$(dpkg-query --admindir="$d/var/lib/dpkg" -S /usr/bin/cri-dockerd)" "$name: /usr/bin/cri-dockerd"
cmp -s "$d/usr/bin/cri-dockerd" "$bin" || die "deb: /usr/bin/cri-dockerd is not the .tgz's binary"
hack/systemd-verify.sh "$d"
expect "$d" "deb: ours over upstream's (its mask undone)" "enabled,active enabled,active" 0

dpkgr -i "$next_deb"
expect "$d" "deb: upgrade" "enabled,active enabled,active" 0
operator "$d" disable --now cri-docker.service cri-docker.socket
dpkgr -i "$next_deb"
expect "$d" "deb: reinstall after the operator's disable" "disabled,inactive disabled,inactive" 0
operator "$d" enable --now cri-docker.socket cri-docker.service

# The release gets the node's flags from the unit's environment file.
echo 'CRI_DOCKERD_OPTS="--docker-endpoint=unix:///run/other-docker.sock --pinned-images=registry.k8s.io/*"' >>"$d/etc/default/cri-dockerd"
dpkgr -r "$name"
want "removed" "$(status "$name")" "rc "
want "deb: release's flags" "$(cat "$d/run/fake-systemd/releases")" \
  "pins release --docker-endpoint=unix:///run/other-docker.sock --pinned-images=registry.k8s.io/*"
[[ ! -e $d/usr/bin/cri-dockerd ]] || die "deb: /usr/bin/cri-dockerd left after removal"
[[ -f $d/etc/default/cri-dockerd ]] || die "deb: /etc/default/cri-dockerd gone with dpkg -r"
expect "$d" "deb: remove" "disabled,inactive disabled,inactive" 1
dpkgr -i "$deb"
expect "$d" "deb: remove -> install" "enabled,active enabled,active" 0
touch "$d/run/fake-systemd/engine-down"
dpkgr -r "$name"
grep -qF 'warning: pins not released (exit 1)' "$tmp/cmd.out" || die "dpkg -r, engine down: no warning: $(cat "$tmp/cmd.out")"
rm "$d/run/fake-systemd/engine-down"
expect "$d" "deb: remove, engine down (release fails)" "disabled,inactive disabled,inactive" 1
dpkgr -i "$deb"
expect "$d" "deb: remove -> install" "enabled,active enabled,active" 0

CRI_DOCKERD_KEEP_PINS=1 dpkgr -r "$name"
grep -qF 'pins kept in the engine (CRI_DOCKERD_KEEP_PINS=1)' "$tmp/cmd.out" || die "dpkg -r: pins not kept: $(cat "$tmp/cmd.out")"
expect "$d" "deb: remove, CRI_DOCKERD_KEEP_PINS=1" "disabled,inactive disabled,inactive" 0
dpkgr --purge "$name"
want "purged" "$(status "$name")" ""
[[ ! -e $d/etc/default/cri-dockerd && ! -e $d/var/lib/cri-dockerd-dockpin ]] || die "deb: files left after purge"
dpkgr -i "$deb"
expect "$d" "deb: purge -> install" "enabled,active enabled,active" 0

touch "$d/etc/cri-dockerd/keep-pins"
dpkgr --purge "$name"
expect "$d" "deb: purge, /etc/cri-dockerd/keep-pins" "disabled,inactive disabled,inactive" 0
rm "$d/etc/cri-dockerd/keep-pins"

operator "$d" mask cri-docker.service
dpkgr -i "$deb"
expect "$d" "deb: install, service masked" "disabled,inactive masked,inactive" 0
dpkgr -i "$next_deb"
expect "$d" "deb: upgrade, service masked" "disabled,inactive masked,inactive" 0
dpkgr -r "$name"
expect "$d" "deb: remove, service masked" "disabled,inactive masked,inactive" 1
dpkgr -i "$deb"
expect "$d" "deb: remove -> install, service masked" "disabled,inactive masked,inactive" 0
operator "$d" unmask cri-docker.service
dpkgr --purge "$name"
expect "$d" "deb: purge" "disabled,inactive disabled,inactive" 1

rmdir "$d/run/systemd/system"
dpkgr -i "$deb"
expect "$d" "deb: install without running systemd" "enabled,inactive enabled,inactive" 0
mkdir "$d/run/systemd/system"
operator "$d" start cri-docker.socket cri-docker.service

# Back to upstream's .deb: apt removes ours (Conflicts), then installs upstream's.
apt_root() {
  DEBIAN_FRONTEND=noninteractive run apt-get -q -y -o Dir="$d" -o Dir::State::status="$d/var/lib/dpkg/status" \
    -o DPkg::Options::=--root="$d" -o DPkg::Options::=--log=/dev/null -o Debug::NoLocking=1 \
    -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0 "$@"
}
apt_root install "$tmp/upstream.deb"
want "back to upstream: upstream's" "$(status cri-dockerd)" "ii "
want "back to upstream: ours" "$(status "$name")" "rc "
grep -q '^Removing cri-dockerd-dockpin' "$tmp/cmd.out" || die "apt did not remove ours: $(cat "$tmp/cmd.out")"
expect "$d" "deb: back to upstream's with apt" "enabled,active enabled,active" 1
dpkgr -i "$deb"
expect "$d" "deb: ours over upstream's again" "enabled,active enabled,active" 0

# dpkg --root with chrootless scripts (DPKG_ROOT): the tree is not the running system; the host's
# deb-systemd-helper, which honours DPKG_ROOT, undoes its own mask and keeps an operator's.
c=$tmp/chrootless
mkdir -p "$c/var/lib/dpkg/info" "$c/var/lib/dpkg/updates" "$c/run/fake-systemd" "$tmp/bin"
touch "$c/var/lib/dpkg/status"
cp "$tmp/stub/systemctl" "$tmp/bin/systemctl"
dpkgc() { PATH="$tmp/bin:$PATH" run dpkg --root="$c" --force-script-chrootless --log=/dev/null "$@"; }
DPKG_ROOT=$c DPKG_MAINTSCRIPT_PACKAGE=cri-dockerd run deb-systemd-helper mask cri-docker.service
dpkgc -i "$deb"
expect "$c" "deb chrootless: install (a package's mask undone)" "enabled,inactive enabled,inactive" 0
dpkgc --purge "$name"
expect "$c" "deb chrootless: purge" "disabled,inactive disabled,inactive" 0
mkdir -p "$c/etc/systemd/system"
ln -s /dev/null "$c/etc/systemd/system/cri-docker.socket"
dpkgc -i "$deb"
expect "$c" "deb chrootless: install, socket masked" "masked,inactive disabled,inactive" 0

# --- .rpm: a stand-in for upstream's (Epoch 3, release 3.el9) with its %systemd_* scriptlets: %post
# presets the service (here: leaves it as it is), %preun on erase disables and stops it, %postun on
# upgrade restarts it. dnf on the root, as `dnf install --allowerasing` runs on a node.
mkdir -p "$tmp/uprpm/scripts"
cat >"$tmp/uprpm/scripts/post.sh" <<'EOF'
#!/bin/sh
if [ "$1" = 1 ]; then systemctl --no-reload preset cri-docker.service || true; fi
EOF
cat >"$tmp/uprpm/scripts/preun.sh" <<'EOF'
#!/bin/sh
if [ "$1" = 0 ]; then systemctl --no-reload disable --now cri-docker.service || true; fi
EOF
cat >"$tmp/uprpm/scripts/postun.sh" <<'EOF'
#!/bin/sh
systemctl daemon-reload || true
if [ "$1" -ge 1 ]; then systemctl try-restart cri-docker.service || true; fi
EOF
cat >"$tmp/uprpm/nfpm.yaml" <<EOF
name: cri-dockerd
arch: $arch
platform: linux
version: \${VERSION}
version_schema: none
release: "3.el9"
maintainer: stand-in <none@invalid>
description: stand-in for upstream cri-dockerd
license: Apache-2.0
contents:
  - {src: $tmp/stub/upstream-cri-dockerd, dst: /usr/bin/cri-dockerd, file_info: {mode: 0755}}
  - {src: packaging/systemd/cri-docker.service, dst: /usr/lib/systemd/system/cri-docker.service}
  - {src: packaging/systemd/cri-docker.socket, dst: /usr/lib/systemd/system/cri-docker.socket}
scripts:
  postinstall: $tmp/uprpm/scripts/post.sh
  preremove: $tmp/uprpm/scripts/preun.sh
  postremove: $tmp/uprpm/scripts/postun.sh
EOF
_output/package/nfpkg -config "$tmp/uprpm/nfpm.yaml" -version "$release" -arch "$arch" -out "$tmp/uprpm" >/dev/null
uprpm=$(find "$tmp/uprpm" -name '*.rpm')

r=$tmp/rpm
newroot "$r"
rpm --root "$r" --initdb
rpmr() { run rpm --root "$r" "$@"; }
dnfr() {
  run dnf -y --installroot="$r" --disablerepo='*' --setopt=reposdir=/nonexistent --releasever=1 \
    --nogpgcheck --setopt=cachedir="$tmp/dnfcache" "$@"
}
installed() { rpm --root "$r" -q --qf '%{NAME}-%{RELEASE}\n' "$1" 2>/dev/null | grep -v 'not installed' || true; }

dnfr install "$uprpm"
operator "$r" enable --now cri-docker.socket cri-docker.service
expect "$r" "rpm: upstream's package, enabled by hand" "enabled,active enabled,active" 0
# Ours replaces it in one transaction: upstream's %preun (disable --now) runs after our %post, our
# %posttrans after both.
dnfr install --allowerasing "$rpmf"
want "rpm: ours over upstream's" "$(installed "$name")/$(installed cri-dockerd)" "$name-1/"
cmp -s "$r/usr/bin/cri-dockerd" "$bin" || die "rpm: /usr/bin/cri-dockerd is not the .tgz's binary"
[[ -f $r/etc/sysconfig/cri-dockerd ]] || die "rpm: no /etc/sysconfig/cri-dockerd"
expect "$r" "rpm: ours over upstream's (dnf --allowerasing)" "enabled,active enabled,active" 0

rpmr -U "$next_rpm"
expect "$r" "rpm: upgrade" "enabled,active enabled,active" 0
operator "$r" disable --now cri-docker.service cri-docker.socket
rpmr -U --replacepkgs "$next_rpm"
expect "$r" "rpm: reinstall after the operator's disable" "disabled,inactive disabled,inactive" 0
operator "$r" enable --now cri-docker.socket cri-docker.service

echo "CRI_DOCKERD_OPTS='--containerd-namespace=other --log-level=debug'" >>"$r/etc/sysconfig/cri-dockerd"
rpmr -e "$name"
want "rpm: release's flags" "$(cat "$r/run/fake-systemd/releases")" "pins release --containerd-namespace=other --log-level=debug"
[[ ! -e $r/usr/bin/cri-dockerd && ! -e $r/var/lib/cri-dockerd-dockpin ]] || die "rpm: files left after erase"
expect "$r" "rpm: erase" "disabled,inactive disabled,inactive" 1
rpmr -i "$rpmf"
expect "$r" "rpm: erase -> install" "enabled,active enabled,active" 0
CRI_DOCKERD_KEEP_PINS=1 dnfr remove "$name"
grep -qF 'pins kept in the engine (CRI_DOCKERD_KEEP_PINS=1)' "$tmp/cmd.out" || die "dnf remove: pins not kept: $(cat "$tmp/cmd.out")"
expect "$r" "rpm: dnf remove, CRI_DOCKERD_KEEP_PINS=1" "disabled,inactive disabled,inactive" 0

operator "$r" mask cri-docker.socket
rpmr -i "$rpmf"
expect "$r" "rpm: install, socket masked" "masked,inactive disabled,inactive" 0
rpmr -U "$next_rpm"
expect "$r" "rpm: upgrade, socket masked" "masked,inactive disabled,inactive" 0
rpmr -e "$name"
expect "$r" "rpm: erase, socket masked" "masked,inactive disabled,inactive" 1
operator "$r" unmask cri-docker.socket

# Back to upstream's: dnf installs it, then erases ours; our %preun then finds upstream's binary in
# place: it cannot release, says so, and restarts the service on upstream's binary.
rpmr -i "$rpmf"
expect "$r" "rpm: install" "enabled,active enabled,active" 0
dnfr install --allowerasing "$uprpm"
want "rpm: back to upstream's" "$(installed "$name")/$(installed cri-dockerd)" "/cri-dockerd-3.el9"
grep -q 'pins not released' "$tmp/cmd.out" || die "rpm: no warning that the pins stay: $(cat "$tmp/cmd.out")"
expect "$r" "rpm: back to upstream's (dnf --allowerasing)" "enabled,active enabled,active" 0

printf '  %s\n' "${summary[@]}" >&2
log "packages checked: $(basename "$deb"), $(basename "$rpmf"), $(basename "$tgz"); ${#summary[@]} install paths"
