#!/bin/sh
# cri-dockerd-dockpin: before the files are unpacked (dpkg preinst, rpm %pre).
# dpkg calls it with `install` for a first install and for one after `dpkg -r` (the package left
# in state rc, its config files kept), and with `upgrade` when the package is installed. postinst
# cannot tell the first two from an upgrade (dpkg gives it the last configured version in both), so
# this records `install` for it in /var/lib/cri-dockerd-dockpin/pending. An upgrade leaves a
# pending install as it is: a package unpacked and never configured is still a first install.
# rpm: %post knows from its own argument; nothing to do here.
set -e
state=${DPKG_ROOT:-}/var/lib/cri-dockerd-dockpin

case "$1" in
  install)
    mkdir -p "$state"
    echo install >"$state/pending"
    ;;
esac
exit 0
