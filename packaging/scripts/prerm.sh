#!/bin/sh
# cri-dockerd-dockpin: before the files are removed (dpkg prerm, rpm %preun).
# On removal, not on an upgrade: stop and disable the service and its socket. Pods and
# containers keep running in the engine; a cri-dockerd installed next takes them over.
set -e

case "$1" in
  remove|deconfigure|0) ;; # dpkg; rpm: 0 versions left after this erase
  *) exit 0 ;;
esac

[ -d "${DPKG_ROOT:-}/run/systemd/system" ] || exit 0
systemctl disable --now cri-docker.service cri-docker.socket || true
exit 0
