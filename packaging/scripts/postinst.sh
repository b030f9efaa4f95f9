#!/bin/sh
# cri-dockerd-dockpin: after the files are in place (dpkg postinst; rpm %post and %posttrans).
# First install (also when it replaces upstream's cri-dockerd, whose removal stopped its
# daemon): unmask, enable and start the socket and the service, as upstream's packages do.
# Upgrade: restart the service if it runs, so the new binary serves (pods keep running:
# the daemon keeps no container state in memory).
#
# rpm runs an obsoleted package's %preun after our %post, and upstream's %preun stops and
# disables the units we share names with; so under rpm, %post only records what to do and
# %posttrans, which runs after every other scriptlet of the transaction, does it.
set -e
pending=${DPKG_ROOT:-}/run/cri-dockerd-dockpin.pending

case "$1" in
  configure) # dpkg: $2 is the version configured before, empty on a first install
    if [ -z "$2" ]; then action=install; else action=upgrade; fi ;;
  [0-9]*) # rpm: %post gets 1 (install) or 2 (upgrade), %posttrans 0 (or the count, on newer rpm)
    if [ -f "$pending" ]; then
      action=$(cat "$pending")
      rm -f "$pending"
    else
      if [ "$1" = 1 ]; then action=install; else action=upgrade; fi
      [ -d "${DPKG_ROOT:-}/run/systemd/system" ] && echo "$action" >"$pending"
      exit 0
    fi ;;
  *) exit 0 ;;
esac

# No running systemd (a chroot, an image build, a container): nothing to start. DPKG_ROOT is
# dpkg's --root, for an install into another tree.
[ -d "${DPKG_ROOT:-}/run/systemd/system" ] || exit 0

systemctl daemon-reload || true
if [ "$action" = install ]; then
  systemctl unmask cri-docker.service cri-docker.socket || true
  systemctl enable cri-docker.socket cri-docker.service || true
  systemctl start cri-docker.socket || true
  systemctl restart cri-docker.service || true
else
  systemctl try-restart cri-docker.service || true
fi
exit 0
