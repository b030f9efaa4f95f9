#!/bin/sh
# cri-dockerd-dockpin: after the files are removed (dpkg postrm, rpm %postun): systemd forgets
# the removed units.
set -e

case "$1" in
  remove|purge|0) ;; # dpkg; rpm: 0 versions left after this erase
  *) exit 0 ;;
esac

[ -d "${DPKG_ROOT:-}/run/systemd/system" ] || exit 0
systemctl daemon-reload || true
exit 0
