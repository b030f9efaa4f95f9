#!/bin/sh
# cri-dockerd-dockpin: before the files are removed (dpkg prerm, rpm %preun).
# On removal (dpkg `remove`; rpm 0: no version left after this erase), never on an upgrade or a
# reinstall:
#   1. stop and disable cri-docker.service and cri-docker.socket (pods and containers keep running
#      in the engine; a cri-dockerd installed next takes them over);
#   2. release what pinning holds in the engine: `/usr/bin/cri-dockerd pins release` deletes the
#      instance's containerd lease (dockpin.pinned with the default root directory, else one named after
#      --cri-dockerd-root-directory from CRI_DOCKERD_OPTS) and its pin labels on the engine's containerd image records,
#      so that the engine, and a cri-dockerd without pinning, can remove those images again (on the
#      classic store nothing is held). It gets the node's flags as the unit does, CRI_DOCKERD_OPTS
#      from /etc/default/cri-dockerd or /etc/sysconfig/cri-dockerd (the later file wins; one level
#      of quotes removed, split at whitespace), so --docker-endpoint, --containerd-address and
#      --containerd-namespace given there count; otherwise the defaults: the engine at
#      unix:///var/run/docker.sock, containerd's address and namespace from the engine's /info.
#      Flags put into the unit itself (a drop-in's ExecStart) are not seen: on such a node, release
#      by hand before removing (cri-dockerd pins release <flags>) and keep the pins here.
#      It never fails the removal: when it cannot release (engine down, ...; it gets 120 s) it says
#      so.
#
# Keep the pins (for a cri-dockerd with pinning installed next, which goes on from them) with either
#   - CRI_DOCKERD_KEEP_PINS=1 in the environment of apt, dpkg, dnf or rpm (any value but empty,
#     0, false or no), e.g. `sudo CRI_DOCKERD_KEEP_PINS=1 apt-get remove cri-dockerd-dockpin`;
#   - the file /etc/cri-dockerd/keep-pins (`touch /etc/cri-dockerd/keep-pins`).
#
# When another package's binary already took /usr/bin/cri-dockerd (an rpm transaction that installs
# upstream's package and erases this one, `dnf install --allowerasing`, runs the install first),
# the units are that package's: they stay enabled, the service is restarted on its binary if it
# runs, and nothing can be released here: it says so. DPKG_ROOT (dpkg --root with
# --force-script-chrootless): that tree is not the running system: the units are disabled in it,
# nothing is stopped or released.
set -e
root=${DPKG_ROOT:-}
bin=/usr/bin/cri-dockerd

case "$1" in
  remove|0) ;;
  *) exit 0 ;;
esac
rm -f "$root/var/lib/cri-dockerd-dockpin/pending"
have_systemctl=false
if command -v systemctl >/dev/null 2>&1; then have_systemctl=true; fi
running=false
if $have_systemctl && [ -z "$root" ] && [ -d /run/systemd/system ]; then running=true; fi

# Another package's binary in place: the units are that package's now.
if [ -z "$root" ] && [ -e "$bin" ]; then
  case $("$bin" --version 2>/dev/null || true) in
    *+dockpin*) ;;
    *)
      if $running; then systemctl try-restart cri-docker.service || true; fi
      echo "cri-dockerd-dockpin: warning: pins not released: $bin is another package's binary now;" \
        "a cri-dockerd with pinning can release them (cri-dockerd pins release)" >&2
      exit 0
      ;;
  esac
fi

if $running; then
  systemctl disable --now cri-docker.service cri-docker.socket || true
elif $have_systemctl; then
  if [ -n "$root" ]; then
    systemctl --root="$root" disable cri-docker.service cri-docker.socket || true
  else
    systemctl disable cri-docker.service cri-docker.socket || true
  fi
fi
[ -z "$root" ] || exit 0

case ${CRI_DOCKERD_KEEP_PINS:-} in
  '' | 0 | false | no) ;;
  *)
    echo "cri-dockerd-dockpin: pins kept in the engine (CRI_DOCKERD_KEEP_PINS=$CRI_DOCKERD_KEEP_PINS)"
    exit 0
    ;;
esac
if [ -e /etc/cri-dockerd/keep-pins ]; then
  echo "cri-dockerd-dockpin: pins kept in the engine (/etc/cri-dockerd/keep-pins)"
  exit 0
fi
# The unit's CRI_DOCKERD_OPTS, read as systemd reads its EnvironmentFile= lines (not sourced).
opts=
for f in /etc/default/cri-dockerd /etc/sysconfig/cri-dockerd; do
  if [ ! -r "$f" ] || ! grep -q '^[[:space:]]*CRI_DOCKERD_OPTS=' "$f"; then continue; fi
  opts=$(sed -n 's/^[[:space:]]*CRI_DOCKERD_OPTS=//p' "$f" | tail -n 1)
  case $opts in
    \"*\")
      opts=${opts#\"}
      opts=${opts%\"}
      ;;
    \'*\')
      opts=${opts#\'}
      opts=${opts%\'}
      ;;
  esac
done
echo "cri-dockerd-dockpin: releasing the pins held in the engine ($bin pins release${opts:+ $opts})"
set -f # a pattern in the flags is the flag's, not a file name
failed=
# shellcheck disable=SC2086 # split at whitespace, as systemd splits $CRI_DOCKERD_OPTS
if command -v timeout >/dev/null 2>&1; then
  timeout 120 "$bin" pins release $opts || failed=$?
else
  "$bin" pins release $opts || failed=$?
fi
if [ -n "$failed" ]; then
  echo "cri-dockerd-dockpin: warning: pins not released (exit $failed): the engine keeps the pinned" \
    "images until a cri-dockerd with pinning releases them (cri-dockerd pins release)" >&2
fi
exit 0
